import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../api/src/clock.js';
import type { HttpClient } from '../support/http.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { startTestPageServer, type TestPageServer } from '../support/test-page-server.js';
import { newFsSession, writeFile, type FsSession } from './browser-fs.fixtures.js';
import { newProject } from './browsers.fixtures.js';

/**
 * POST /browsers/{id}/playwright/execute against real headless sessions: the real
 * service, real agents (as root, so each execution runs confined as its session's uid),
 * real Chromium, real Playwright in the runner. Nothing is faked. Two sessions for the
 * whole file (the second one is the neighbour whose files must stay out of reach).
 */

const HELLO = '<!doctype html><html><head><title>Hello from the test</title></head><body><p id="x">forty-two</p></body></html>';

let app: TestApp;
let pages: TestPageServer;
let client: HttpClient;
let session: FsSession;
let neighbour: FsSession;
/** A directory like the service's data dir: root's, mode 0700, with a 0600 file. */
let dataDir: string;

const execute = (body: unknown, id = session.id) => client.post(`/browsers/${id}/playwright/execute`, body);
const run = async (code: string, timeout_sec?: number) => {
  const res = await execute({ code, ...(timeout_sec !== undefined ? { timeout_sec } : {}) });
  expect(res.status, res.text).toBe(200);
  return res.body as { success: boolean; result?: unknown; error?: string; stdout?: string; stderr?: string };
};

/** Live processes whose command line contains `marker`, from /proc (the host's view: every namespace). */
function processesWith(marker: string): number[] {
  return readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry) && Number(entry) !== process.pid)
    .filter((entry) => {
      try {
        const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
        if (stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z')) return false;
        return readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0').join(' ').includes(marker);
      } catch {
        return false;
      }
    })
    .map(Number);
}

/** The pid listening on the session's agent port. */
async function agentPid(id: string): Promise<number> {
  const { rows } = await app.database.db.query<{ agent_url: string }>('SELECT agent_url FROM browser_sessions WHERE id = $1', [id]);
  const port = new URL(rows[0]!.agent_url).port;
  const out = execFileSync('ss', ['-Hltnp', `sport = :${port}`], { encoding: 'utf8' });
  return Number(/pid=(\d+)/.exec(out)![1]);
}

beforeAll(async () => {
  app = await startTestApp({ clock: systemClock });
  pages = await startTestPageServer({ '/hello': HELLO });
  ({ http: client } = await newProject(app.tenant.http));
  [session, neighbour] = await Promise.all([newFsSession(app, client), newFsSession(app, client)]);
  dataDir = mkdtempSync(path.join(os.tmpdir(), 'browserplane-pw-data-'));
  writeFileSync(path.join(dataDir, 'secret.key'), 'service secret', { mode: 0o600 });
}, 120_000);
afterAll(async () => {
  await app?.close();
  await pages?.close();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

describe('running code', () => {
  it('returns what the code returns, with page bound to the browser\'s first page', async () => {
    const outcome = await run(`await page.goto(${JSON.stringify(`${pages.url}/hello`)}); return await page.title();`);
    expect(outcome).toMatchObject({ success: true, result: 'Hello from the test' });
  }, 60_000);

  it('drives the page: goto, then evaluate in it, with context and browser bound too', async () => {
    const outcome = await run(`
      await page.goto(${JSON.stringify(`${pages.url}/hello`)});
      const text = await page.evaluate(() => document.getElementById('x').textContent);
      return { text, pages: context.pages().length, contexts: browser.contexts().length, connected: browser.isConnected() };`);
    expect(outcome.success, outcome.error).toBe(true);
    expect(outcome.result).toMatchObject({ text: 'forty-two', connected: true });
    expect((outcome.result as { pages: number }).pages).toBeGreaterThanOrEqual(1);
  }, 60_000);

  it('captures console output as stdout and stderr', async () => {
    const outcome = await run("console.log('hello', 42); console.info({ a: 1 }); console.error('to stderr'); console.warn('warned'); return null;");
    expect(outcome.success).toBe(true);
    expect(outcome.stdout).toBe("hello 42\n{ a: 1 }\n");
    expect(outcome.stderr).toBe('to stderr\nwarned\n');
  }, 60_000);

  it('answers null for code that returns nothing, and JSON for what it returns', async () => {
    expect(await run('await page.title();')).toMatchObject({ success: true, result: null });
    expect((await run('return { when: new Date(0), list: [1, "two"], skip: () => 1 };')).result).toEqual({ when: '1970-01-01T00:00:00.000Z', list: [1, 'two'] });
  }, 60_000);

  it('reports a value JSON cannot hold as a failure that says so', async () => {
    const outcome = await run('return 10n;');
    expect(outcome.success).toBe(false);
    expect(outcome.error).toMatch(/cannot be sent as JSON.*BigInt/);
  }, 60_000);
});

describe('failures', () => {
  it('a thrown error: success false, its message as error and its stack in stderr', async () => {
    const outcome = await run("console.error('before'); throw new Error('boom at the end');");
    expect(outcome).toMatchObject({ success: false, error: 'boom at the end' });
    expect(outcome.stderr).toMatch(/^before\nError: boom at the end\n\s+at /);
    expect(outcome.result).toBeUndefined();
  }, 60_000);

  it('a Playwright error is the same shape', async () => {
    const outcome = await run("await page.click('#does-not-exist', { timeout: 200 });");
    expect(outcome.success).toBe(false);
    expect(outcome.error).toContain('Timeout 200ms exceeded');
  }, 60_000);

  it('a syntax error: success false, nothing run', async () => {
    const outcome = await run("console.log('ran'); return (;");
    expect(outcome.success).toBe(false);
    expect(outcome.error).toMatch(/^SyntaxError: /);
    expect(outcome.stdout).toBe('');
  }, 60_000);

  it('a timeout: success false, and the process is gone with everything it started', async () => {
    const outcome = await run(
      `require('child_process').spawn('sleep', ['987'], { detached: true, stdio: 'ignore' }).unref();
       console.log('started');
       await new Promise(() => {});`,
      1,
    );
    expect(outcome).toMatchObject({ success: false, error: 'Execution timed out after 1000ms', stdout: 'started\n' });
    // SIGKILL is sent before the answer; the processes' exits follow it.
    await expect.poll(() => processesWith('playwright/runner.js'), { timeout: 30_000 }).toEqual([]);
    await expect.poll(() => processesWith('sleep 987'), { timeout: 30_000 }).toEqual([]);
  }, 60_000);

  it('a busy loop is stopped by the timeout too, and the agent goes on serving', async () => {
    const outcome = await run('for (;;) {}', 1);
    expect(outcome).toMatchObject({ success: false, error: 'Execution timed out after 1000ms' });
    expect(await run('return 1 + 1;')).toMatchObject({ success: true, result: 2 });
  }, 60_000);

  it('process.exit in the code is a failure, not the agent\'s end', async () => {
    const outcome = await run("console.log('bye'); process.exit(3);");
    expect(outcome).toMatchObject({ success: false, stdout: 'bye\n' });
    expect(outcome.error).toContain('exited (code 3)');
    expect(await run('return 2;')).toMatchObject({ success: true, result: 2 });
  }, 60_000);
});

describe('confinement', () => {
  it('runs as the session\'s unprivileged user, alone in its pid namespace, without the agent\'s environment', async () => {
    const outcome = await run(`
      const fs = require('fs');
      return { uid: process.getuid(), gid: process.getgid(), groups: process.getgroups(), pid: process.pid,
        procs: fs.readdirSync('/proc').filter((entry) => /^\\d+$/.test(entry)).length,
        nnp: /NoNewPrivs:\\s*1/.test(fs.readFileSync('/proc/self/status', 'utf8')),
        env: Object.keys(process.env).sort() };`);
    expect(outcome.success, outcome.error).toBe(true);
    const seen = outcome.result as { uid: number; gid: number; groups: number[]; pid: number; procs: number; nnp: boolean; env: string[] };
    expect(seen.uid).toBeGreaterThanOrEqual(1000);
    expect(seen.uid).toBe(statSync(session.hostRoot).uid);
    expect(seen.groups).toEqual([seen.gid]);
    expect(seen.nnp).toBe(true);
    // bubblewrap's own init is pid 1 of the namespace; the runner is the only other process.
    expect(seen.pid).toBeLessThanOrEqual(2);
    expect(seen.procs).toBeLessThanOrEqual(2);
    expect(seen.env).toEqual(['HOME', 'LANG', 'NODE_ENV', 'PATH', 'PWD', 'TMPDIR']);
  }, 60_000);

  it('leaves nothing in the host\'s /tmp: its /tmp is the session\'s own, the fs API\'s', async () => {
    const name = `pw-left-${process.pid}-${Date.now()}`;
    const outcome = await run(`require('fs').writeFileSync('/tmp/${name}', 'left'); return require('fs').readdirSync('/tmp');`);
    expect(outcome.success, outcome.error).toBe(true);
    expect(outcome.result).toContain(name);
    expect(existsSync(`/tmp/${name}`)).toBe(false);
    expect((await client.get(`/browsers/${session.id}/fs/read_file?path=/tmp/${name}`)).text).toBe('left');
  }, 60_000);

  it('cannot signal the agent: the kill is refused and the agent lives on', async () => {
    const pid = await agentPid(session.id);
    const outcome = await run(`process.kill(${pid}, 'SIGKILL'); return 'killed';`);
    expect(outcome.success).toBe(false);
    expect(outcome.error).toMatch(/ESRCH|EPERM/);
    expect(processesWith('dist/agent/src/main.js')).toContain(pid);
    expect(await run('return 3;')).toMatchObject({ success: true, result: 3 });
  }, 60_000);

  it('cannot read a file only root may read (the service\'s data dir)', async () => {
    const outcome = await run(`return require('fs').readFileSync(${JSON.stringify(path.join(dataDir, 'secret.key'))}, 'utf8');`);
    expect(outcome.success).toBe(false);
    // Not even there: the sandbox's "/" is the session's files (ENOENT); EACCES were it bound.
    expect(outcome.error).toMatch(/ENOENT|EACCES/);
  }, 60_000);

  it('cannot read another session\'s files, but reads and writes its own', async () => {
    expect((await writeFile(neighbour, '/private.txt', 'neighbour secret')).status).toBe(204);
    const stolen = await run(`return require('fs').readFileSync(${JSON.stringify(path.join(neighbour.hostRoot, 'private.txt'))}, 'utf8');`);
    expect(stolen.success).toBe(false);
    expect(stolen.error).toMatch(/ENOENT|EACCES/);
    expect((await writeFile(session, '/mine.txt', 'my own')).status).toBe(204);
    const own = await run("const fs = require('fs'); fs.writeFileSync('written-by-code.txt', 'hi'); return fs.readFileSync(process.env.HOME + '/mine.txt', 'utf8');");
    expect(own).toMatchObject({ success: true, result: 'my own' });
    const read = await client.get(`/browsers/${session.id}/fs/read_file?path=/written-by-code.txt`);
    expect(read.text).toBe('hi');
  }, 60_000);
});

describe('session end', () => {
  it('ends the executions still running, and whatever they started', async () => {
    const doomed = await newFsSession(app, client);
    const pending = execute(
      // The interval keeps the process alive once its browser connection is gone: only its parent's end stops it.
      { code: "require('child_process').spawn('sleep', ['876'], { detached: true, stdio: 'ignore' }).unref(); require('fs').writeFileSync('running', ''); setInterval(() => {}, 1000); await new Promise(() => {});", timeout_sec: 200 },
      doomed.id,
    );
    await expect.poll(async () => (await client.get(`/browsers/${doomed.id}/fs/file_info?path=/running`)).status, { timeout: 90_000, interval: 250 }).toBe(200);
    expect(processesWith('sleep 876')).toHaveLength(1);
    expect((await client.delete(`/browsers/${doomed.id}`)).status).toBe(204);
    // The agent's exit takes its runner down (parent-death signals), and with it the namespace.
    await expect.poll(() => processesWith('sleep 876'), { timeout: 60_000 }).toEqual([]);
    await expect.poll(() => processesWith('playwright/runner.js'), { timeout: 60_000 }).toEqual([]);
    // The agent may answer before it exits, or the connection ends with it.
    const ended = await pending.catch(() => undefined);
    expect(ended?.body.success).not.toBe(true);
  }, 180_000);
});

describe('requests', () => {
  it.each([
    [{}, 'code'],
    [{ code: '' }, 'code'],
    [{ code: 1 }, 'code'],
    [{ code: 'return 1', timeout_sec: 0 }, 'timeout_sec'],
    [{ code: 'return 1', timeout_sec: -1 }, 'timeout_sec'],
    [{ code: 'return 1', timeout_sec: 301 }, 'timeout_sec'],
    [{ code: 'return 1', timeout_sec: '5' }, 'timeout_sec'],
    [{ code: 'return 1', extra: true }, 'extra'],
  ])('refuses %j with 400 naming %s', async (body, field) => {
    const res = await execute(body);
    expect(res.status, res.text).toBe(400);
    expect(res.body.code).toBeTypeOf('string');
    expect(JSON.stringify(res.body.details ?? res.body.message)).toContain(field);
  });

  it('another project\'s session is 404, and nothing runs there', async () => {
    const { http: other } = await newProject(app.tenant.http);
    const res = await other.post(`/browsers/${session.id}/playwright/execute`, { code: "require('fs').writeFileSync('from-other-project.txt', 'x')" });
    expect(res.status).toBe(404);
    expect((await client.get(`/browsers/${session.id}/fs/file_info?path=/from-other-project.txt`)).status).toBe(404);
  });

  it('an unknown session is 404', async () => {
    expect((await execute({ code: 'return 1' }, 'no-such-browser')).status).toBe(404);
  });

  it('runs at most two executions per browser at once: a third is 409 until one ends', async () => {
    // Each says it runs by leaving a file, then waits for the test's go-ahead.
    const wait = (n: number) =>
      `const fs = require('fs'); fs.writeFileSync('running-${n}', ''); while (!fs.existsSync('release')) await new Promise((r) => setTimeout(r, 50)); return ${n};`;
    const first = execute({ code: wait(1), timeout_sec: 150 });
    const second = execute({ code: wait(2), timeout_sec: 150 });
    const running = (n: number) => client.get(`/browsers/${session.id}/fs/file_info?path=/running-${n}`).then((res) => res.status);
    await expect.poll(() => running(1), { timeout: 90_000, interval: 250 }).toBe(200);
    await expect.poll(() => running(2), { timeout: 90_000, interval: 250 }).toBe(200);
    const refused = await execute({ code: 'return 0' });
    expect(refused.status, refused.text).toBe(409);
    expect(refused.body.code).toBe('too_many_executions');
    expect((await writeFile(session, '/release', '')).status).toBe(204);
    expect((await first).body).toMatchObject({ success: true, result: 1 });
    expect((await second).body).toMatchObject({ success: true, result: 2 });
    expect(await run('return 4;')).toMatchObject({ success: true, result: 4 });
  }, 240_000);
});
