import { mkdtempSync } from 'node:fs';
import { chmod, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inspectApps, runAction, type RunnerOptions } from '../../api/src/modules/apps/runner.js';
import { CJS_APP, ESM_APP, makeBuildDir } from './app-runner.fixtures.js';

/** The runner against the real SDK and real Node in the real sandbox (needs dist: runner-child.js). */

let dataDir: string;
let esm: RunnerOptions;
let cjs: RunnerOptions;

const invoke = (base: RunnerOptions, actionName: string, extra: Partial<Parameters<typeof runAction>[0]> = {}) =>
  runAction({ ...base, appName: base === cjs ? 'cjs-demo' : 'demo', actionName, payload: null, invocationId: 'inv_test', ...extra });

describe.skipIf(process.getuid?.() !== 0)('app runner', () => {
  beforeAll(async () => {
    dataDir = mkdtempSync(path.join(os.tmpdir(), 'bp-app-runner-'));
    await chmod(dataDir, 0o711);
    const common = { runtime: 'node' as const, env: { KERNEL_API_KEY: 'unused' }, timeoutMs: 20_000, dataDir };
    esm = { ...common, buildDir: await makeBuildDir(dataDir, 'dep_esm', { 'index.mjs': ESM_APP }), entry: 'index.mjs' };
    cjs = { ...common, buildDir: await makeBuildDir(dataDir, 'dep_cjs', { 'index.js': CJS_APP, 'package.json': '{"type":"commonjs"}' }), entry: 'index.js' };
  });
  afterAll(async () => {
    await rm(dataDir, { recursive: true, force: true });
  });

  it('reads the apps and actions an ESM entry registers', async () => {
    expect(await inspectApps(esm)).toEqual({
      apps: [{ name: 'demo', actions: ['echo', 'nothing', 'fail', 'hang', 'log', 'env', 'self', 'secret'].map((name) => ({ name })) }],
    });
  });

  it('reads the apps of a CommonJS entry', async () => {
    expect(await inspectApps(cjs)).toEqual({ apps: [{ name: 'cjs-demo', actions: [{ name: 'hello' }] }] });
  });

  it('fails inspection of an entry that throws, with its message', async () => {
    const buildDir = await makeBuildDir(dataDir, 'dep_bad', { 'index.mjs': "throw new Error('no good');\n" });
    await expect(inspectApps({ ...esm, buildDir })).rejects.toThrow(/no good/);
  });

  it('runs an action with its payload and context', async () => {
    expect(await invoke(esm, 'echo', { payload: '{"n":1}' })).toEqual({ ok: true, output: JSON.stringify({ invocation: 'inv_test', payload: { n: 1 } }) });
    expect(await invoke(cjs, 'hello', { payload: '{"name":"ada"}' })).toEqual({ ok: true, output: '"hello ada"' });
    expect(await invoke(esm, 'nothing')).toEqual({ ok: true, output: 'null' });
  });

  it('reports a thrown error, an unknown action and a timeout', async () => {
    const lines: string[] = [];
    expect(await invoke(esm, 'fail', { onLog: (_stream, line) => lines.push(line) })).toEqual({ ok: false, error: 'the action broke on purpose' });
    expect(lines.join('\n')).toMatch(/at .*index\.mjs/);
    expect(await invoke(esm, 'missing')).toEqual({ ok: false, error: 'app "demo" has no action named "missing"' });
    const started = Date.now();
    expect(await invoke(esm, 'hang', { timeoutMs: 1500 })).toEqual({ ok: false, error: 'timed out after 2s' });
    expect(Date.now() - started).toBeLessThan(8000);
  });

  it('cancels on abort', async () => {
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 500);
    expect(await invoke(esm, 'hang', { signal: controller.signal })).toEqual({ ok: false, error: 'cancelled' });
  });

  it('hands the log lines and the env to the action', async () => {
    const lines: string[] = [];
    expect(await invoke(esm, 'log', { onLog: (stream, line) => lines.push(`${stream}:${line}`) })).toEqual({ ok: true, output: '"logged"' });
    expect(lines).toEqual(expect.arrayContaining(['stdout:line one', 'stderr:line two']));
    const result = await invoke({ ...esm, env: { GREETING: 'hi', KERNEL_BASE_URL: 'http://127.0.0.1:1', KERNEL_API_KEY: 'k' } }, 'env');
    expect(result).toEqual({ ok: true, output: JSON.stringify({ greeting: 'hi', base: 'http://127.0.0.1:1', hasKey: true }) });
  });

  it('keeps the action off the data dir', async () => {
    const secret = path.join(dataDir, 'postgres-password');
    await writeFile(secret, 'hunter2', { mode: 0o644 });
    expect(await invoke({ ...esm, env: { KERNEL_API_KEY: 'unused', SECRET_PATH: secret } }, 'secret')).toEqual({ ok: true, output: '"refused: ENOENT"' });
  });
});
