import { execFile, execFileSync } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cleanupServices, REPO_ROOT, startService, type RunningService } from '../support/service.js';

/**
 * The Go SDK against the built service: test/fixtures/kernel-go-sdk/wire-check, a small Go
 * program on the vendored kernel-go-sdk 0.28.0 (its other modules come from the Go module
 * proxy), uploads two files, reads a watch stream and acquires from a full pool, and prints
 * what each call gave. Needs the `go` tool: skipped, and says so, without it.
 */

const PROGRAM_DIR = path.join(REPO_ROOT, 'test/fixtures/kernel-go-sdk/wire-check');
const hasGo = (() => {
  try {
    execFileSync('go', ['version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();
if (!hasGo) console.warn('go-sdk.test.ts: no `go` tool on PATH, the Go SDK checks are skipped');

interface WireCheck {
  upload: Record<string, string>;
  watch: { first_event: { type: string; path: string } | null; stream_error: string } | null;
  acquire: { status: number; content_type: string; nil: boolean; error: string } | null;
  errors: string[] | null;
}

let service: RunningService;
let buildDir: string;
let result: WireCheck;

beforeAll(async () => {
  if (!hasGo) return;
  buildDir = await mkdtemp(path.join(os.tmpdir(), 'browserplane-go-'));
  const binary = path.join(buildDir, 'wire-check');
  // A cold build compiles the SDK (a minute or two on a busy 2-core machine).
  await promisify(execFile)('go', ['build', '-o', binary, '.'], { cwd: PROGRAM_DIR, timeout: 540_000 });
  service = await startService();
  const { stdout } = await promisify(execFile)(binary, [], {
    env: { ...process.env, KERNEL_BASE_URL: service.url, KERNEL_API_KEY: service.adminKey },
    timeout: 240_000,
  });
  result = JSON.parse(stdout) as WireCheck;
  console.info(`Go SDK wire check: ${stdout.trim()}`);
}, 900_000);
afterAll(async () => {
  await cleanupServices();
  if (buildDir) await rm(buildDir, { recursive: true, force: true });
});

describe.skipIf(!hasGo)('the Go SDK (kernel-go-sdk 0.28.0)', () => {
  it('makes every call without an error of its own', () => {
    expect(result.errors).toBeNull();
  });

  it('uploads files named files.dest_path / files.file, each to its path', () => {
    expect(result.upload).toEqual({ '/go/one.txt': 'first from go', '/go/two.txt': 'second from go' });
  });

  it('reads the first change of a watch stream instead of ending on its first block', () => {
    expect(result.watch).toEqual({ first_event: { type: 'CREATE', path: '/go-watched/new.txt' }, stream_error: '' });
  });

  it('gets the timed-out acquire as a 204 with Content-Type application/json and no lease', () => {
    expect(result.acquire).toMatchObject({ status: 204, content_type: 'application/json', nil: true });
    // This SDK decodes the empty JSON body and reports EOF, whatever the service does
    // with a 204 (docs/wire-compatibility.md); without the Content-Type it fails earlier,
    // refusing a non-JSON answer.
    expect(result.acquire!.error).toBe('error parsing response json: EOF');
  });
});
