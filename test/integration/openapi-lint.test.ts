import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../support/test-app.js';

/**
 * The published /openapi.json lints clean with Redocly's recommended rules (redocly.yaml)
 * and Spectral's oas ruleset (.spectral.yaml): no error, no warning. Both linters are the
 * real ones from node_modules, run on the document the in-process app serves.
 */

const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const bin = (name: string) => path.join(REPO_ROOT, 'node_modules/.bin', name);
// No telemetry or update check: the linters must not reach out while they run.
const LINT_ENV = { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true', NO_UPDATE_NOTIFIER: '1' };

interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
}

async function run(file: string, args: string[]): Promise<RunResult> {
  try {
    const { stdout, stderr } = await promisify(execFile)(file, args, { cwd: REPO_ROOT, env: LINT_ENV, maxBuffer: 64 << 20, timeout: 120_000 });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code?: number | string; stdout?: string; stderr?: string };
    if (failed.code === 'ENOENT') throw new Error(`${file} is missing: npm install (package.json lists it in devDependencies)`, { cause: error });
    return { code: typeof failed.code === 'number' ? failed.code : -1, stdout: failed.stdout ?? '', stderr: failed.stderr ?? '' };
  }
}

describe('the published OpenAPI document lints clean', { timeout: 180_000 }, () => {
  let app: TestApp;
  let dir: string;
  let documentFile: string;
  let doc: { servers?: Array<{ url: string }>; tags?: Array<{ name: string; description?: string }>; paths: Record<string, unknown> };

  beforeAll(async () => {
    app = await startTestApp();
    const res = await app.client().get<typeof doc>('/openapi.json');
    expect(res.status).toBe(200);
    doc = res.body;
    dir = await mkdtemp(path.join(os.tmpdir(), 'bp-openapi-lint-'));
    documentFile = path.join(dir, 'openapi.json');
    await writeFile(documentFile, JSON.stringify(doc, null, 2));
  });
  afterAll(async () => {
    await app?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it("has no error or warning under Redocly's recommended rules", async () => {
    const result = await run(bin('redocly'), ['lint', documentFile, '--config', path.join(REPO_ROOT, 'redocly.yaml'), '--format=json']);
    const report = JSON.parse(result.stdout) as { totals: { errors: number; warnings: number }; problems: Array<{ ruleId: string; message: string; location: unknown }> };
    expect(report.problems.map((p) => `${p.ruleId}: ${p.message} at ${JSON.stringify(p.location)}`)).toEqual([]);
    expect(report.totals).toMatchObject({ errors: 0, warnings: 0 });
    expect(result.code).toBe(0);
  });

  it("has no result at all (errors, warnings, hints) under Spectral's oas ruleset", async () => {
    const result = await run(bin('spectral'), ['lint', documentFile, '--ruleset', path.join(REPO_ROOT, '.spectral.yaml'), '--format', 'json', '--fail-severity', 'hint', '--quiet']);
    const results = JSON.parse(result.stdout.trim() || '[]') as Array<{ code: string; message: string; path: string[] }>;
    expect(results.map((r) => `${r.code}: ${r.message} at ${r.path.join('.')}`)).toEqual([]);
    expect(result.code, result.stderr).toBe(0);
  });

  it('names this service as its server and declares every tag it uses, with a description', () => {
    expect(doc.servers).toEqual([{ url: app.url.replace(/\/$/, ''), description: 'This service' }]);
    const declared = new Map((doc.tags ?? []).map((tag) => [tag.name, tag.description]));
    const used = Object.values(doc.paths).flatMap((item) => Object.values(item as Record<string, { tags?: string[] }>).flatMap((op) => op.tags ?? []));
    for (const tag of new Set(used)) expect(declared.get(tag), tag).toBeTruthy();
  });

  it('publishes no tuple as `items: false`, no Express wildcard and no /internal side door', () => {
    const text = JSON.stringify(doc);
    expect(text).not.toContain('"items":false');
    expect(Object.keys(doc.paths).filter((p) => p.includes('*') || p.includes(':') || p.startsWith('/internal'))).toEqual([]);
    expect(Object.keys(doc.paths)).toContain('/live-view/{path}');
  });
});
