import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../api/src/clock.js';
import { eventually } from '../support/eventually.js';
import type { HttpClient } from '../support/http.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { newProject } from './browsers.fixtures.js';
import { readFile, writeFile, type FsSession, newFsSession } from './browser-fs.fixtures.js';
import { collect, ProcessCalls, text } from './browser-process.fixtures.js';

/**
 * browsers.process against one real headless session (real agent, bubblewrap, Chromium,
 * Postgres): output, exit codes, timeouts, terminals, stdin, signals, the output stream,
 * the shared filesystem with the fs API, and every refusal. Nothing is faked.
 */

let app: TestApp;
let client: HttpClient;
let fs: FsSession;
let proc: ProcessCalls;

beforeAll(async () => {
  app = await startTestApp({ clock: systemClock });
  ({ http: client } = await newProject(app.tenant.http));
  fs = await newFsSession(app, client);
  proc = new ProcessCalls(client, fs.id);
}, 120_000);
afterAll(async () => {
  await app?.close();
});

/** A sleep length no other test uses: the way to find that sleep among the host's processes. */
const uniqueSeconds = () => String(100_000 + Math.floor(Math.random() * 800_000));

/** Host pids of `sleep <seconds>` (the sleep itself, not its launcher, whose command line holds the same words). */
function hostSleeps(seconds: string): number[] {
  return readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry))
    .filter((pid) => {
      try {
        return readFileSync(`/proc/${pid}/comm`, 'utf8').trim() === 'sleep' && readFileSync(`/proc/${pid}/cmdline`, 'utf8') === `sleep\0${seconds}\0`;
      } catch {
        return false;
      }
    })
    .map(Number);
}

describe('exec', () => {
  it('runs a command and answers its stdout and stderr apart, with exit code 0', async () => {
    const result = await proc.sh('echo hello; echo oops >&2');
    expect(result).toMatchObject({ exit_code: 0, stdout: 'hello\n', stderr: 'oops\n', stdout_truncated: false, stderr_truncated: false, timed_out: false });
    expect(result.duration_ms).toBeGreaterThanOrEqual(0);
  });

  it('answers the exit code, and 128 + the signal for a process a signal ended', async () => {
    expect((await proc.sh('exit 3')).exit_code).toBe(3);
    expect((await proc.sh('kill -TERM $$')).exit_code).toBe(143);
  });

  it('answers a command that does not exist with a non-zero exit and says why on stderr', async () => {
    const res = await proc.exec({ command: 'no-such-command-bp' });
    expect(res.status).toBe(200);
    expect(res.body.exit_code).not.toBe(0);
    expect(text(res.body.stderr_b64 as string)).toContain('no-such-command-bp');
  });

  it('kills a command still running at timeout_sec and says it timed out', async () => {
    const result = await proc.sh('echo started; sleep 600', { timeout_sec: 1 });
    expect(result.timed_out).toBe(true);
    expect(result.exit_code).not.toBe(0);
    expect(result.stdout).toBe('started\n');
  });

  it('caps each stream at 1 MiB and says it cut it', async () => {
    const result = await proc.sh('head -c 3000000 /dev/zero; echo small >&2');
    expect(result.stdout_truncated).toBe(true);
    expect(Buffer.from(result.stdout_b64, 'base64').length).toBe(1024 * 1024);
    expect(result).toMatchObject({ stderr: 'small\n', stderr_truncated: false });
  });

  it('passes args, env and cwd, with HOME=/ and "/" as the default cwd', async () => {
    expect((await proc.sh('pwd; echo $HOME')).stdout).toBe('/\n/\n');
    await proc.sh('mkdir -p /work/sub');
    const result = await proc.exec({ command: 'sh', args: ['-c', 'pwd; echo "$GREETING" "$1"', 'sh', 'arg one'], env: { GREETING: 'hi' }, cwd: '/work/sub' });
    expect(text(result.body.stdout_b64 as string)).toBe('/work/sub\nhi arg one\n');
  });

  it('limits the tasks a process may fork (RLIMIT_NPROC)', async () => {
    expect((await proc.sh('grep "Max processes" /proc/self/limits')).stdout).toMatch(/Max processes\s+512\s+512/);
  });

  it('runs as the browser\'s own unprivileged user, the owner of its files', async () => {
    const id = (await proc.sh('id -u; id -G')).stdout.trim().split('\n');
    const { rows } = await app.database.db.query<{ agent_url: string }>('SELECT agent_url FROM browser_sessions WHERE id = $1', [fs.id]);
    expect(rows).toHaveLength(1);
    expect(Number(id[0])).not.toBe(0);
    expect(id[1]).not.toMatch(/\b0\b/);
    expect((await proc.exec({ command: 'id', as_user: id[0] })).status).toBe(200);
  });
});

describe('the same files as the fs API', () => {
  it('reads with cat what fs.writeFile wrote, at the same path', async () => {
    expect((await writeFile(fs, '/notes/from-api.txt', 'written by the API')).status).toBe(204);
    expect((await proc.sh('cat /notes/from-api.txt')).stdout).toBe('written by the API');
  });

  it('lets fs.readFile read what a process wrote, at the same path', async () => {
    expect((await proc.sh('mkdir -p /notes && printf "written by a process" > /notes/from-process.txt')).exit_code).toBe(0);
    const res = await readFile(fs, '/notes/from-process.txt');
    expect(res.status).toBe(200);
    expect(res.text).toBe('written by a process');
  });

  it('shares /tmp with the fs API and between processes: the session\'s own /tmp, not the host\'s', async () => {
    expect((await writeFile(fs, '/tmp/from-api.txt', 'api in tmp')).status).toBe(204);
    expect((await proc.sh('cat /tmp/from-api.txt')).stdout).toBe('api in tmp');
    expect((await proc.sh('printf "process in tmp" > /tmp/from-process.txt')).exit_code).toBe(0);
    expect((await proc.sh('cat /tmp/from-process.txt')).stdout).toBe('process in tmp');
    expect((await readFile(fs, '/tmp/from-process.txt')).text).toBe('process in tmp');
    expect(existsSync('/tmp/from-process.txt')).toBe(false);
  });
});

describe('spawn', () => {
  it('returns process_id, pid and started_at, and status goes from running to exited', async () => {
    const res = await proc.spawn({ command: 'sh', args: ['-c', 'read line; exit 5'] });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ process_id: expect.stringMatching(/^[0-9a-f-]{36}$/), pid: expect.any(Number), started_at: expect.any(String) });
    const id = res.body.process_id as string;
    const first = await proc.status(id);
    expect(first.status).toBe(200);
    expect(first.body).toMatchObject({ state: 'running', exit_code: null });
    // Right after spawn the sandbox may not be up yet: its memory shows once it is.
    const running = await eventually(async () => (await proc.status(id)).body as { mem_bytes: number; cpu_pct: number; state: string }, {
      intervalMs: 100,
      accept: (body) => body.mem_bytes > 0,
      timeoutMs: 30_000,
    });
    expect(running.state).toBe('running');
    expect(running.cpu_pct).toBeGreaterThanOrEqual(0);
    expect((await proc.stdin(id, 'go\n')).body).toEqual({ written_bytes: 3 });
    await eventually(async () => (await proc.status(id)).body as { state: string }, { intervalMs: 100, accept: (body) => body.state === 'exited', timeoutMs: 30_000 });
    expect((await proc.status(id)).body).toMatchObject({ state: 'exited', exit_code: 5 });
  });

  it('streams stdin to cat back on the SSE stream, then the exit frame after a kill', async () => {
    const id = await proc.spawnOk({ command: 'cat' });
    const sse = await proc.stream(id);
    expect(sse.res.status).toBe(200);
    await proc.stdin(id, 'hello cat\n');
    const first = await sse.frame(1, 30_000);
    expect(first.data).toEqual({ stream: 'stdout', data_b64: Buffer.from('hello cat\n').toString('base64') });
    expect((await proc.kill(id, 'TERM')).body).toEqual({ ok: true });
    await sse.ended;
    expect(sse.payloads.at(-1)).toEqual({ event: 'exit', exit_code: 143 });
  });

  it('gives a late subscriber the output kept so far, both streams in order, then the exit', async () => {
    const id = await proc.spawnOk({ command: 'sh', args: ['-c', 'echo one; echo two >&2; echo three'] });
    await eventually(async () => (await proc.status(id)).body as { state: string }, { intervalMs: 100, accept: (body) => body.state === 'exited', timeoutMs: 30_000 });
    const output = await proc.outputOf(id);
    expect(output).toEqual({ stdout: 'one\nthree\n', stderr: 'two\n', exitCode: 0 });
    // A second late subscriber gets the same.
    expect(await proc.outputOf(id)).toEqual(output);
  });

  it('kills the whole sandbox with KILL, background children included', async () => {
    const seconds = uniqueSeconds();
    const id = await proc.spawnOk({ command: 'sh', args: ['-c', `sleep ${seconds} & sleep ${seconds} & wait`] });
    await eventually(() => hostSleeps(seconds).length, { intervalMs: 100, accept: (count) => count === 2, timeoutMs: 30_000 });
    expect((await proc.kill(id, 'KILL')).status).toBe(200);
    await eventually(async () => (await proc.status(id)).body as { state: string }, { intervalMs: 100, accept: (body) => body.state === 'exited', timeoutMs: 30_000 });
    await eventually(() => hostSleeps(seconds).length, { intervalMs: 100, accept: (count) => count === 0, timeoutMs: 30_000 });
  });

  it('delivers INT and HUP to the process', async () => {
    for (const [signal, code] of [['INT', 130], ['HUP', 129]] as const) {
      const id = await proc.spawnOk({ command: 'sleep', args: ['1000'] });
      await eventually(async () => (await proc.status(id)).body.mem_bytes as number, { intervalMs: 100, accept: (bytes) => bytes > 0, timeoutMs: 30_000 });
      expect((await proc.kill(id, signal)).status).toBe(200);
      const output = await proc.outputOf(id);
      expect(output.exitCode).toBe(code);
    }
  });

  it('runs on a terminal with allocate_tty: stty size follows cols/rows and a resize', async () => {
    const id = await proc.spawnOk({ command: 'sh', args: ['-c', 'stty size; read line; stty size'], allocate_tty: true, cols: 100, rows: 30 });
    const sse = await proc.stream(id);
    const seen = () => collect(sse.payloads).stdout;
    await eventually(() => seen(), { intervalMs: 100, accept: (out) => out.includes('30 100'), timeoutMs: 30_000 });
    expect((await proc.resize(id, 120, 40)).body).toEqual({ ok: true });
    await proc.stdin(id, '\r');
    await sse.ended;
    expect(seen()).toContain('40 120');
    expect(sse.payloads.at(-1)).toEqual({ event: 'exit', exit_code: 0 });
  });

  it('kills a spawned process at its timeout_sec', async () => {
    const id = await proc.spawnOk({ command: 'sleep', args: ['1000'], timeout_sec: 1 });
    const output = await proc.outputOf(id);
    expect(output.exitCode).not.toBe(0);
    expect((await proc.status(id)).body.state).toBe('exited');
  });
});

describe('bad input', () => {
  const expectError = (res: { status: number; body: { code?: string; message?: string } }, status: number, code?: string) => {
    expect(res.status, JSON.stringify(res.body)).toBe(status);
    if (code) expect(res.body.code).toBe(code);
    expect(typeof res.body.message).toBe('string');
  };

  it('refuses malformed exec and spawn bodies with 400 and runs nothing', async () => {
    expectError(await proc.exec({}), 400);
    expectError(await proc.exec({ command: '' }), 400);
    expectError(await proc.exec({ command: 'id', unknown: 1 }), 400);
    expectError(await proc.exec({ command: 'id', args: 'not-an-array' }), 400);
    expectError(await proc.exec({ command: 'id', env: { 'BAD-NAME': 'x' } }), 400);
    expectError(await proc.exec({ command: 'id', cwd: 'relative' }), 400);
    expectError(await proc.exec({ command: 'id', timeout_sec: -1 }), 400);
    expectError(await proc.exec({ command: 'id', timeout_sec: 100_000 }), 400);
    expectError(await proc.spawn({ command: 'sh', allocate_tty: true, cols: 0 }), 400);
    expectError(await proc.spawn({ command: 'id', cols: 'wide' }), 400);
  });

  it('refuses as_root and any user but the browser\'s own with a code naming why', async () => {
    expectError(await proc.exec({ command: 'id', as_root: true }), 400, 'as_root_unsupported');
    expectError(await proc.spawn({ command: 'id', as_root: true }), 400, 'as_root_unsupported');
    expectError(await proc.exec({ command: 'id', as_user: 'root' }), 400, 'as_user_unsupported');
    expect((await proc.exec({ command: 'id', as_root: false, as_user: null })).status).toBe(200);
  });

  it('refuses a cwd that is not a directory of the browser filesystem', async () => {
    expectError(await proc.exec({ command: 'id', cwd: '/no/such/dir' }), 400, 'invalid_cwd');
    expectError(await proc.exec({ command: 'id', cwd: '/../../..' }), 400, 'invalid_path');
  });

  it('answers 404 for an unknown process and 400 for a malformed id', async () => {
    const unknown = '00000000-0000-4000-8000-000000000000';
    expectError(await proc.status(unknown), 404, 'process_not_found');
    expectError(await proc.stdin(unknown, 'x'), 404, 'process_not_found');
    expectError(await proc.kill(unknown, 'TERM'), 404, 'process_not_found');
    expectError(await proc.resize(unknown, 10, 10), 404, 'process_not_found');
    const sse = await proc.stream(unknown);
    expect(sse.res.status).toBe(404);
    expectError(await proc.status('not-a-uuid'), 400);
  });

  it('refuses bad signal, stdin and resize bodies, resize without a terminal, and calls on an exited process', async () => {
    const id = await proc.spawnOk({ command: 'cat' });
    expectError(await proc.kill(id, 'STOP'), 400);
    expectError(await client.post(`/browsers/${fs.id}/process/${id}/stdin`, { data_b64: '***' }), 400);
    expectError(await client.post(`/browsers/${fs.id}/process/${id}/stdin`, {}), 400);
    expectError(await proc.resize(id, 0, 10), 400);
    expectError(await proc.resize(id, 80, 24), 409, 'not_a_tty');
    await proc.kill(id, 'KILL');
    await eventually(async () => (await proc.status(id)).body as { state: string }, { intervalMs: 100, accept: (body) => body.state === 'exited', timeoutMs: 30_000 });
    expectError(await proc.stdin(id, 'late'), 409, 'process_exited');
    expectError(await proc.kill(id, 'TERM'), 409, 'process_exited');
  });

  it('answers 404 for an unknown session and for another project\'s session', async () => {
    expectError(await client.post('/browsers/no-such-session/process/exec', { command: 'id' }), 404);
    const { http: other } = await newProject(app.tenant.http);
    expectError(await other.post(`/browsers/${fs.id}/process/exec`, { command: 'id' }), 404);
    expectError(await other.post(`/browsers/${fs.id}/process/spawn`, { command: 'id' }), 404);
    const id = await proc.spawnOk({ command: 'sleep', args: ['1000'] });
    expectError(await other.get(`/browsers/${fs.id}/process/${id}/status`), 404);
    expectError(await other.post(`/browsers/${fs.id}/process/${id}/kill`, { signal: 'KILL' }), 404);
    expect((await proc.status(id)).body.state).toBe('running');
    await proc.kill(id, 'KILL');
  });
});

describe('the session\'s end', () => {
  it('ends every process when the session is deleted', async () => {
    const other = await newFsSession(app, client);
    const calls = new ProcessCalls(client, other.id);
    const seconds = uniqueSeconds();
    await calls.spawnOk({ command: 'sh', args: ['-c', `sleep ${seconds}`] });
    await eventually(() => hostSleeps(seconds).length, { intervalMs: 100, accept: (count) => count > 0, timeoutMs: 30_000 });
    expect((await client.delete(`/browsers/${other.id}`)).status).toBeLessThan(300);
    await eventually(() => hostSleeps(seconds).length, { intervalMs: 100, accept: (count) => count === 0, timeoutMs: 60_000 });
  });
});

describe('limits and the pool reset', () => {
  let session: FsSession;
  let calls: ProcessCalls;
  /** The agent's own POST /reset, which a pool release with reuse calls. */
  const resetBrowser = async () => {
    const { rows } = await app.database.db.query<{ agent_url: string }>('SELECT agent_url FROM browser_sessions WHERE id = $1', [session.id]);
    const res = await fetch(`${rows[0]!.agent_url}/reset`, { method: 'POST', headers: { authorization: `Bearer ${app.deps.agentTokens(session.id)}` } });
    expect(res.status).toBe(200);
  };

  beforeAll(async () => {
    session = await newFsSession(app, client);
    calls = new ProcessCalls(client, session.id);
  }, 120_000);

  it('ends every process at a pool reset and forgets the exited ones', async () => {
    const seconds = uniqueSeconds();
    const running = await calls.spawnOk({ command: 'sh', args: ['-c', `sleep ${seconds}`] });
    const exited = await calls.spawnOk({ command: 'echo', args: ['previous holder'] });
    await eventually(() => hostSleeps(seconds).length, { intervalMs: 100, accept: (count) => count > 0, timeoutMs: 30_000 });
    await eventually(async () => (await calls.status(exited)).body as { state: string }, { intervalMs: 100, accept: (body) => body.state === 'exited', timeoutMs: 30_000 });
    await resetBrowser();
    expect(hostSleeps(seconds)).toEqual([]);
    expect((await calls.status(running)).status).toBe(404);
    expect((await calls.status(exited)).status).toBe(404);
    expect((await calls.sh('echo next holder')).stdout).toBe('next holder\n');
  });

  it('refuses a process past the 16 running at once, and takes one again when one ends', async () => {
    await resetBrowser();
    const ids: string[] = [];
    for (let i = 0; i < 16; i++) ids.push(await calls.spawnOk({ command: 'sleep', args: ['1000'] }));
    const refused = await calls.spawn({ command: 'sleep', args: ['1000'] });
    expect(refused.status).toBe(409);
    expect(refused.body.code).toBe('process_limit_reached');
    expect((await calls.exec({ command: 'id' })).body.code).toBe('process_limit_reached');
    await calls.kill(ids[0]!, 'KILL');
    await eventually(async () => (await calls.status(ids[0]!)).body as { state: string }, { intervalMs: 100, accept: (body) => body.state === 'exited', timeoutMs: 30_000 });
    expect((await calls.exec({ command: 'id' })).status).toBe(200);
    await resetBrowser();
  });

  it('refuses a stdin write over 1 MiB (the agent\'s limit) and one over the service\'s body limit', async () => {
    const id = await calls.spawnOk({ command: 'wc', args: ['-c'] });
    const viaService = await client.post(`/browsers/${session.id}/process/${id}/stdin`, { data_b64: Buffer.alloc(128 * 1024).toString('base64') });
    expect(viaService.status).toBe(413);
    expect(viaService.body.code).toBe('payload_too_large');
    // The tests' service takes 64 KiB bodies; a deployment's takes far more, and the agent's limit applies.
    const { rows } = await app.database.db.query<{ agent_url: string }>('SELECT agent_url FROM browser_sessions WHERE id = $1', [session.id]);
    const atAgent = await fetch(`${rows[0]!.agent_url}/process/${id}/stdin`, {
      method: 'POST',
      headers: { authorization: `Bearer ${app.deps.agentTokens(session.id)}`, 'content-type': 'application/json' },
      body: JSON.stringify({ data_b64: Buffer.alloc(1024 * 1024 + 1).toString('base64') }),
    });
    expect(atAgent.status).toBe(413);
    expect(((await atAgent.json()) as { code: string }).code).toBe('stdin_too_large');
    expect((await calls.stdin(id, 'abc')).body).toEqual({ written_bytes: 3 });
    await calls.kill(id, 'TERM');
    expect((await calls.outputOf(id)).exitCode).toBe(143);
  });
});
