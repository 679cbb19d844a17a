import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync } from 'node:fs';
import { mkdir, readlink, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { ZipFile } from 'yazl';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { extractBundle, packBundle } from '../../api/src/modules/apps/pod/bundle.js';
import { runPod, sha256, startGitServer, startPod, startStandIn, type StandInState, type WireRecord } from './app-pod-job.fixtures.js';

/**
 * The pod program (api/src/modules/apps/pod/job-main.ts) as a Job's container runs it: a
 * real child process on dist/, BROWSERPLANE_APP_SANDBOX=pod, a temp dir standing in for
 * the pod's /work, real npm and the registry. The API's side of the wire is a STAND-IN
 * (app-pod-job.fixtures.ts: another engineer builds the real one) that records what the
 * pod sent. Needs dist (node_modules/.bin/tsc -p tsconfig.build.json).
 */

const TOKEN = 'job-token-for-tests';
const MIB = 1024 * 1024;
/** The image's /app is read-only: the JS build and invoke run with the install mounted so (needs root for the mount). */
const READ_ONLY_INSTALL = { readOnlyInstall: process.getuid?.() === 0 };
const LIMITS = { build_timeout_ms: 240_000, max_unpacked_bytes: 100 * MIB, max_files: 20_000 };

const JS_APP = `
import { Kernel } from '@onkernel/sdk';
const app = new Kernel().app('pod-demo');
app.action('greet', async (ctx: { invocation_id: string }, payload: { name: string }) => {
  console.log('greeting ' + payload.name);
  console.error('to stderr');
  return { hello: payload.name, invocation: ctx.invocation_id, greeting: process.env.GREETING ?? null };
});
app.action('fail', async (ctx: unknown) => { throw new Error('the action broke on purpose'); });
app.action('hang', async (ctx: unknown) => { console.log('hanging now'); return new Promise(() => setInterval(() => {}, 1000)); });
`;

let root: string;
const workDir = (name: string) => path.join(root, name);

const buildInput = (deploymentId: string, source: Buffer, entry: string) => ({
  deployment_id: deploymentId,
  entrypoint_rel_path: entry,
  source_type: 'upload',
  source_url: null,
  source_ref: null,
  source_path: null,
  source_checksum: sha256(source),
  git_token: null,
  env_vars: { GREETING: 'hello from env' },
  limits: LIMITS,
});

const runInput = (invocationId: string, actionName: string, payload: object | null) => ({
  invocation_id: invocationId,
  deployment_id: 'dep_podjs',
  app_name: 'pod-demo',
  action_name: actionName,
  entry: '.browserplane/entry.mjs',
  runtime: 'node',
  payload: payload === null ? null : JSON.stringify(payload),
  timeout_ms: 60_000,
  env: { GREETING: 'hello from env', KERNEL_API_KEY: 'invocation-key', KERNEL_BASE_URL: 'http://127.0.0.1:9', ENTRYPOINT_RELPATH: 'index.ts' },
});

async function zipOf(files: Record<string, string>): Promise<Buffer> {
  const zip = new ZipFile();
  for (const [name, text] of Object.entries(files)) zip.addBuffer(Buffer.from(text), name);
  zip.end();
  const chunks: Buffer[] = [];
  for await (const chunk of zip.outputStream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

/** Runs one pod against a fresh stand-in; returns its exit and what the stand-in recorded. */
async function podAgainst(state: Omit<StandInState, 'token'>, args: string[], work: string, options: { readOnlyInstall?: boolean } = {}): Promise<{ code: number | null; stderr: string; record: WireRecord }> {
  const api = await startStandIn({ token: TOKEN, ...state });
  try {
    const { code, stderr } = await runPod(args, { url: api.url, token: TOKEN, workDir: work, ...options });
    return { code, stderr, record: api.record };
  } finally {
    await api.close();
  }
}

beforeAll(() => {
  root = mkdtempSync(path.join(os.tmpdir(), 'bp-pod-job-'));
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

describe('pod program: a JS app built in one pod and invoked in another', () => {
  const source = Buffer.from(JS_APP);
  let build: Awaited<ReturnType<typeof podAgainst>>;

  beforeAll(async () => {
    build = await podAgainst({ buildInput: buildInput('dep_podjs', source, 'index.ts'), source }, ['build', 'dep_podjs'], workDir('build-js'), READ_ONLY_INSTALL);
  }, 300_000);

  it('builds with real npm, ships the build log, uploads the bundle and posts the apps', () => {
    expect(build.stderr).toBe('');
    expect(build.code).toBe(0);
    expect(build.record.buildResult).toEqual({
      ok: true,
      entry: '.browserplane/entry.mjs',
      runtime: 'node',
      checksum: sha256(source),
      apps: [{ name: 'pod-demo', actions: [{ name: 'greet' }, { name: 'fail' }, { name: 'hang' }] }],
    });
    const messages = build.record.logs.map((line) => line.message);
    expect(messages).toContain('no package.json: installing @onkernel/sdk 0.84.0');
    expect(messages.some((line) => line.startsWith('npm install'))).toBe(true);
    expect(messages).toContain('bundling index.ts into .browserplane/entry.mjs');
    expect(build.record.bundle?.subarray(0, 2)).toEqual(Buffer.from([0x1f, 0x8b]));
    // The bundle before the result: the API records the apps only once it holds their code.
    const { requests } = build.record;
    expect(requests.indexOf('PUT /internal/app-jobs/build/bundle')).toBeLessThan(requests.indexOf('POST /internal/app-jobs/build/result'));
    expect(requests.at(-1)).toBe('POST /internal/app-jobs/build/result');
  });

  it('invokes the action from the bundle in a second work dir, retrying a 503, and ships its console lines', async () => {
    const run = await podAgainst(
      { runInput: runInput('inv_greet', 'greet', { name: 'Ada' }), runBundle: build.record.bundle!, failFirst: { 'GET /internal/app-jobs/run': [503] } },
      ['invoke', 'inv_greet', 'pod-demo', 'greet'],
      workDir('run-greet'),
      READ_ONLY_INSTALL,
    );
    expect(run.code).toBe(0);
    expect(run.record.runResult).toMatchObject({ ok: true });
    expect(JSON.parse(run.record.runResult!.output as string)).toEqual({ hello: 'Ada', invocation: 'inv_greet', greeting: 'hello from env' });
    expect(run.record.requests.slice(0, 2)).toEqual(['GET /internal/app-jobs/run', 'GET /internal/app-jobs/run']);
    expect(run.record.logs).toEqual(
      expect.arrayContaining([expect.objectContaining({ stream: 'stdout', message: 'greeting Ada' }), expect.objectContaining({ stream: 'stderr', message: 'to stderr' })]),
    );
    expect(existsSync(path.join(workDir('run-greet'), 'apps', 'builds', 'dep_podjs', 'node_modules', '@onkernel', 'sdk', 'package.json'))).toBe(true);
  }, 120_000);

  it('posts ok:false with the error of an action that throws', async () => {
    const run = await podAgainst({ runInput: runInput('inv_fail', 'fail', null), runBundle: build.record.bundle! }, ['invoke', 'inv_fail', 'pod-demo', 'fail'], workDir('run-fail'));
    expect(run.code).toBe(0);
    expect(run.record.runResult).toEqual({ ok: false, error: expect.stringContaining('the action broke on purpose') as string });
  }, 120_000);

  it('on SIGTERM ends the action and posts cancelled', async () => {
    let started!: () => void;
    const hanging = new Promise<void>((resolve) => (started = resolve));
    const api = await startStandIn({ token: TOKEN, runInput: runInput('inv_hang', 'hang', null), runBundle: build.record.bundle!, onLog: (line) => line === 'hanging now' && started() });
    try {
      const pod = startPod(['invoke', 'inv_hang', 'pod-demo', 'hang'], { url: api.url, token: TOKEN, workDir: workDir('run-hang') });
      // A pod that ended without the action's line fails below rather than waiting here.
      await Promise.race([hanging, pod.done]);
      pod.kill('SIGTERM');
      const { code } = await pod.done;
      expect(code).toBe(0);
      expect(api.record.runResult).toEqual({ ok: false, error: 'cancelled' });
    } finally {
      await api.close();
    }
  }, 120_000);
});

describe('pod program: a git source', () => {
  it('fetches the repository itself (smart HTTP, the ref and the path given) and posts the commit as the checksum', async () => {
    const repos = path.join(root, 'git-repos');
    const work = path.join(root, 'git-work');
    await mkdir(path.join(work, 'app'), { recursive: true });
    await writeFile(path.join(work, 'app', 'index.js'), "import { Kernel } from '@onkernel/sdk';\nnew Kernel().app('from-git').action('ping', async (ctx) => 'pong');\n");
    const git = (cwd: string, ...args: string[]) => execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@example.test', ...args], { cwd, encoding: 'utf8' }).trim();
    git(work, 'init', '-q', '-b', 'main');
    git(work, 'add', '.');
    git(work, 'commit', '-q', '-m', 'app');
    const commit = git(work, 'rev-parse', 'HEAD');
    await mkdir(repos, { recursive: true });
    git(repos, 'clone', '-q', '--bare', work, 'app.git');
    const server = await startGitServer(repos);
    try {
      const input = {
        ...buildInput('dep_podgit', Buffer.alloc(0), 'index.js'),
        source_type: 'github',
        source_url: `${server.url}/app.git`,
        source_ref: 'main',
        source_path: 'app',
        source_checksum: null,
      };
      const build = await podAgainst({ buildInput: input }, ['build', 'dep_podgit'], workDir('build-git'));
      expect(build.code).toBe(0);
      expect(build.record.buildResult).toEqual({ ok: true, entry: 'index.js', runtime: 'node', checksum: commit, apps: [{ name: 'from-git', actions: [{ name: 'ping' }] }] });
      expect(build.record.logs.map((line) => line.message)).toContain(`commit ${commit}`);
      expect(build.record.requests).not.toContain('GET /internal/app-jobs/build/source');
    } finally {
      await server.close();
    }
  }, 300_000);
});

describe('pod program: failures', () => {
  it('on SIGTERM during a download that stalls, still posts cancelled within the Job\'s grace', async () => {
    let stalled!: () => void;
    const waiting = new Promise<void>((resolve) => (stalled = resolve));
    const api = await startStandIn({ token: TOKEN, runInput: runInput('inv_stall', 'greet', null), stall: new Set(['GET /internal/app-jobs/run/bundle']), onStall: () => stalled() });
    try {
      const pod = startPod(['invoke', 'inv_stall', 'pod-demo', 'greet'], { url: api.url, token: TOKEN, workDir: workDir('run-stall') });
      await Promise.race([waiting, pod.done]);
      const sent = Date.now();
      pod.kill('SIGTERM');
      expect((await pod.done).code).toBe(0);
      expect(Date.now() - sent).toBeLessThan(5000);
      expect(api.record.runResult).toEqual({ ok: false, error: 'cancelled' });
    } finally {
      await api.close();
    }
  }, 60_000);

  it('posts ok:false with npm\'s last lines when a dependency does not exist, and uploads nothing', async () => {
    const manifest = { private: true, type: 'module', dependencies: { '@onkernel/sdk': '0.84.0', 'browserplane-no-such-package-7f3c9e': '1.0.0' } };
    const source = await zipOf({ 'package.json': JSON.stringify(manifest), 'index.js': "import { Kernel } from '@onkernel/sdk';\nnew Kernel().app('x');\n" });
    const build = await podAgainst({ buildInput: buildInput('dep_baddep', source, 'index.js'), source }, ['build', 'dep_baddep'], workDir('build-baddep'));
    expect(build.code).toBe(0);
    const result = build.record.buildResult as { ok: boolean; error: string; tail: string[] };
    expect(result.ok).toBe(false);
    expect(result.error).toMatch(/^npm install failed/);
    expect(result.tail.join('\n')).toMatch(/404|E404/);
    expect(result.tail.length).toBeLessThanOrEqual(25);
    expect(build.record.requests).not.toContain('PUT /internal/app-jobs/build/bundle');
  }, 300_000);

  it('exits 0 without building when the API answers 409 for the input (the deployment was deleted)', async () => {
    const source = Buffer.from(JS_APP);
    const work = workDir('build-ended');
    const build = await podAgainst({ buildInput: buildInput('dep_ended', source, 'index.ts'), source, ended: new Set(['GET /internal/app-jobs/build']) }, ['build', 'dep_ended'], work);
    expect(build.code).toBe(0);
    expect(build.record.requests).toEqual(['GET /internal/app-jobs/build']);
    expect(existsSync(path.join(work, 'apps', 'builds', 'dep_ended'))).toBe(false);
  }, 60_000);

  it('refuses arguments that are not a command and an id (exit 2, nothing asked)', async () => {
    for (const args of [['build', '../dep'], ['invoke', 'inv_x', 'app'], ['deploy', 'dep_x']]) {
      const pod = await podAgainst({}, args, workDir('bad-args'));
      expect(pod.code).toBe(2);
      expect(pod.record.requests).toEqual([]);
    }
  }, 60_000);

  it('exits non-zero when the API cannot be told (every answer a 500)', async () => {
    const build = await podAgainst({ failFirst: { 'GET /internal/app-jobs/build': Array<number>(10).fill(500) } }, ['build', 'dep_down'], workDir('build-down'));
    expect(build.code).toBe(1);
    expect(build.record.requests.length).toBeGreaterThan(1);
  }, 120_000);

  for (const kind of ['a ../ path', 'an absolute path'] as const) {
    it(`refuses a bundle with an entry outside its directory (${kind}) and writes nothing there`, async () => {
      const craft = path.join(root, `craft-${kind.length}`);
      await mkdir(path.join(craft, 'inner'), { recursive: true });
      await writeFile(path.join(craft, 'inner', 'ok.txt'), 'fine');
      const planted = kind === 'a ../ path' ? '../escaped.txt' : path.join(craft, 'planted.txt');
      await writeFile(path.resolve(craft, 'inner', planted), 'escaped');
      const archive = path.join(craft, 'bundle.tgz');
      // GNU tar with -P keeps '..' and leading '/' in member names, as a hostile archive would.
      execFileSync('tar', ['-czPf', archive, 'ok.txt', planted], { cwd: path.join(craft, 'inner') });
      await rm(path.resolve(craft, 'inner', planted));
      const work = workDir(`run-craft-${kind.length}`);
      const run = await podAgainst({ runInput: runInput('inv_craft', 'greet', null), runBundle: await readFile(archive) }, ['invoke', 'inv_craft', 'pod-demo', 'greet'], work);
      expect(run.code).toBe(0);
      expect(run.record.runResult).toEqual({ ok: false, error: expect.stringMatching(/outside its directory/) as string });
      expect(existsSync(path.resolve(craft, 'inner', planted))).toBe(false);
      expect(existsSync(path.join(work, 'apps', 'builds', 'escaped.txt'))).toBe(false);
    }, 60_000);
  }
});

const PY_APP = `
import kernel

app = kernel.App("pod-py")

@app.action("shout")
def shout(ctx, payload):
    print("shouting " + payload["text"])
    return {"text": payload["text"].upper(), "invocation": ctx.invocation_id}
`;

describe('pod program: a Python app', () => {
  it('builds a venv with real pip, and its bundle (venv links and all) runs the action in another work dir', async () => {
    const source = Buffer.from(PY_APP);
    const build = await podAgainst({ buildInput: buildInput('dep_podpy', source, 'main.py'), source }, ['build', 'dep_podpy'], workDir('build-py'));
    expect(build.code).toBe(0);
    expect(build.record.buildResult).toEqual({ ok: true, entry: 'main.py', runtime: 'python', checksum: sha256(source), apps: [{ name: 'pod-py', actions: [{ name: 'shout' }] }] });
    const input = { ...runInput('inv_py', 'shout', { text: 'quiet' }), deployment_id: 'dep_podpy', app_name: 'pod-py', entry: 'main.py', runtime: 'python' };
    const work = workDir('run-py');
    const run = await podAgainst({ runInput: input, runBundle: build.record.bundle! }, ['invoke', 'inv_py', 'pod-py', 'shout'], work);
    expect(run.code).toBe(0);
    expect(run.record.runResult).toMatchObject({ ok: true });
    expect(JSON.parse(run.record.runResult!.output as string)).toEqual({ text: 'QUIET', invocation: 'inv_py' });
    expect(run.record.logs).toEqual(expect.arrayContaining([expect.objectContaining({ stream: 'stdout', message: 'shouting quiet' })]));
    // The venv's python is an absolute link to the system's: kept as written by the bundle.
    expect(await readlink(path.join(work, 'apps', 'builds', 'dep_podpy', '.browserplane', 'venv', 'bin', 'python3'))).toBe('/usr/bin/python3');
  }, 600_000);
});

describe('pod bundle', () => {
  it('keeps symlinks as written, absolute ones too (a venv\'s bin/python), through pack and extract', async () => {
    const from = path.join(root, 'links-from');
    await mkdir(path.join(from, 'venv', 'bin'), { recursive: true });
    await writeFile(path.join(from, 'venv', 'bin', 'real'), '#!/bin/sh\n', { mode: 0o755 });
    await symlink('/usr/bin/python3', path.join(from, 'venv', 'bin', 'python'));
    await symlink('real', path.join(from, 'venv', 'bin', 'alias'));
    await symlink('venv/bin', path.join(from, 'bin'));
    const archive = path.join(root, 'links.tgz');
    await packBundle(from, archive);
    const to = path.join(root, 'links-to');
    await extractBundle(archive, to);
    expect(await readlink(path.join(to, 'venv', 'bin', 'python'))).toBe('/usr/bin/python3');
    expect(await readlink(path.join(to, 'venv', 'bin', 'alias'))).toBe('real');
    expect(await readlink(path.join(to, 'bin'))).toBe('venv/bin');
    expect(await readFile(path.join(to, 'bin', 'real'), 'utf8')).toBe('#!/bin/sh\n');
  });
});
