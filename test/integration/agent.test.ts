import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { chromium } from 'playwright-core';
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { processGroupMembers } from '../../lib/process-group.js';
import { freePort } from '../../api/src/runtime/agent-process.js';
import { startTestPageServer, type TestPageServer } from '../support/test-page-server.js';
import { agentAuth, fakeChromiumDir, testAgentTokens } from '../support/agent-access.js';

/** The agent on its own, as a pod would run it: environment in, one port out. */

const root = path.resolve(import.meta.dirname, '../..');
const agentEntry = path.join(root, 'dist/agent/src/main.js');

function assertAgentBuilt(): void {
  const sources = readdirSync(path.join(root, 'agent/src')).filter((name) => name.endsWith('.ts'));
  for (const source of sources) {
    const built = path.join(root, 'dist/agent/src', source.replace(/\.ts$/, '.js'));
    if (!existsSync(built) || statSync(built).mtimeMs < statSync(path.join(root, 'agent/src', source)).mtimeMs) {
      throw new Error(`the agent build is missing or stale (${source}): run node_modules/.bin/tsc -p tsconfig.build.json`);
    }
  }
}

interface StartedAgent {
  child: ChildProcess;
  url: string;
  /** Its token: every request but an anonymous GET /health needs it. */
  auth: { authorization: string };
  workDir: string;
  output: () => string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

let scratch: string;
let pages: TestPageServer;

async function startAgent(
  browserId: string,
  spec: Record<string, unknown> = {},
  options: { env?: Record<string, string>; until?: string } = {},
): Promise<StartedAgent> {
  const port = await freePort();
  const workDir = path.join(scratch, browserId);
  const child = spawn(process.execPath, [agentEntry], {
    env: {
      PATH: process.env.PATH,
      AGENT_SPEC: JSON.stringify({ browserId, ...spec }),
      AGENT_TOKEN: testAgentTokens(browserId),
      AGENT_PORT: String(port),
      AGENT_WORK_DIR: workDir,
      ...options.env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  const url = `http://127.0.0.1:${port}`;
  const auth = agentAuth(browserId);
  for (let tries = 0; ; tries++) {
    const health: any = await fetch(`${url}/health`, { headers: auth }).then((r) => r.json(), () => undefined);
    if (health?.status === (options.until ?? 'ready')) break;
    if (tries > 300) throw new Error(`agent not ready: ${output}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return { child, url, auth, workDir, output: () => output, exited };
}

const health = async (agent: StartedAgent): Promise<any> => (await fetch(`${agent.url}/health`, { headers: agent.auth })).json();

const statusField = (pid: number, field: string) =>
  readFileSync(`/proc/${pid}/status`, 'utf8').match(new RegExp(`^${field}:\\s+(.*)$`, 'm'))?.[1];

beforeAll(async () => {
  assertAgentBuilt();
  // Chromium's unprivileged user must pass through it: mkdtemp makes it 700.
  scratch = await mkdtemp(path.join(os.tmpdir(), 'bp-agent-'));
  await chmod(scratch, 0o711);
  pages = await startTestPageServer({ '/hello': '<title>Hello from the agent test</title><p>hi</p>' });
});

afterAll(async () => {
  await pages?.close();
  await rm(scratch, { recursive: true, force: true });
  await rm(`${scratch}-slow-chromium.sh`, { force: true });
});

describe('one running agent', () => {
  let agent: StartedAgent;
  beforeAll(async () => {
    agent = await startAgent('agent-shared', { viewport: { width: 1024, height: 700 }, startUrl: `${pages.url}/start` });
  });
  afterAll(async () => {
    agent.child.kill('SIGTERM');
    await agent.exited;
  });

  it('reports ready with the Chromium version and pid on /health', async () => {
    const body = await health(agent);
    expect(body).toMatchObject({ status: 'ready', browser_id: 'agent-shared', connections: 0, browser: { sandbox: true } });
    expect(body.browser.version).toMatch(/^Chrome\/\d+/);
    expect(body.browser.pid).toBeGreaterThan(0);
  });

  it('opens the start URL in the first tab', async () => {
    for (let tries = 0; !pages.requests.includes('/start') && tries < 100; tries++) await new Promise((r) => setTimeout(r, 20));
    expect(pages.requests).toContain('/start');
  });

  it('rewrites the WebSocket URL of /json/version to point at the agent', async () => {
    const version: any = await (await fetch(`${agent.url}/json/version`, { headers: agent.auth })).json();
    expect(version.Browser).toMatch(/^Chrome\//);
    expect(version.webSocketDebuggerUrl).toBe(`${agent.url.replace('http', 'ws')}/cdp`);
    // The fields of Chromium's own /json/version (made from Browser.getVersion: there is no DevTools port to ask).
    expect(Object.keys(version).sort()).toEqual(['Browser', 'File-Path-Style', 'Protocol-Version', 'User-Agent', 'V8-Version', 'WebKit-Version', 'webSocketDebuggerUrl']);
    expect(version['WebKit-Version']).toMatch(/^537\.36 \(@[0-9a-f]{40}\)$/);
    expect(version['User-Agent']).toMatch(/Chrome\/\d+/);
  });

  it('lets Playwright drive the browser through the CDP pass-through, and counts the client', async () => {
    const browser = await chromium.connectOverCDP(`${agent.url.replace('http', 'ws')}/cdp`, { headers: agent.auth });
    try {
      expect((await health(agent)).connections).toBe(1);
      expect((await health(agent)).idle_since).toBeNull();
      const page = await browser.contexts()[0]!.newPage();
      await page.goto(`${pages.url}/hello`);
      expect(await page.title()).toBe('Hello from the agent test');
      // --window-size from the spec's viewport (the default context does not emulate one).
      expect(await page.evaluate('window.outerWidth')).toBe(1024);
      await page.close();
    } finally {
      await browser.close();
    }
    const before = Date.now();
    for (let tries = 0; (await health(agent)).connections !== 0 && tries < 50; tries++) await new Promise((r) => setTimeout(r, 20));
    const after = await health(agent);
    expect(after).toMatchObject({ status: 'ready', connections: 0 });
    expect(Date.parse(after.idle_since)).toBeGreaterThanOrEqual(before - 1000);
  });

  it('runs Chromium as an unprivileged user with the sandbox on, HOME and TMPDIR in its own dir', async () => {
    const { browser } = await health(agent);
    const members = await processGroupMembers(browser.pid);
    expect(members.length).toBeGreaterThan(3);
    for (const pid of members) expect(statusField(pid, 'Uid')?.split(/\s+/)[0]).not.toBe('0');
    const renderers = members.filter((pid) => readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('--type=renderer'));
    expect(renderers.length).toBeGreaterThan(0);
    for (const pid of renderers) expect(statusField(pid, 'Seccomp')).toBe('2');
    const environ = readFileSync(`/proc/${browser.pid}/environ`, 'utf8').split('\0');
    expect(environ).toContain(`HOME=${agent.workDir}/home`);
    expect(environ).toContain(`TMPDIR=${agent.workDir}/tmp`);
    expect(statSync(path.join(agent.workDir, 'user-data')).uid).not.toBe(0);
  });
});

describe('agent lifecycle', () => {
  it('on SIGTERM closes Chromium, removes its dir and exits 0', async () => {
    const agent = await startAgent('agent-sigterm');
    const { browser } = await health(agent);
    agent.child.kill('SIGTERM');
    expect(await agent.exited).toEqual({ code: 0, signal: null });
    expect(await processGroupMembers(browser.pid)).toEqual([]);
    expect(existsSync(agent.workDir)).toBe(false);
    expect(agent.output()).toMatch(/"graceful":true/);
  });

  it('takes its Chromium with it when it dies: the DevTools pipe closes and Chromium exits', async () => {
    const agent = await startAgent('agent-killed');
    const { browser } = await health(agent);
    expect(await processGroupMembers(browser.pid)).not.toEqual([]);
    const killedAt = Date.now();
    agent.child.kill('SIGKILL');
    await agent.exited;
    let members = await processGroupMembers(browser.pid);
    for (let tries = 0; members.length > 0 && tries < 200; tries++) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      members = await processGroupMembers(browser.pid);
    }
    console.log(`chromium gone ${Date.now() - killedAt} ms after its agent was killed`);
    expect(members).toEqual([]);
    await rm(agent.workDir, { recursive: true, force: true });
  });

  it('exits non-zero with a clear log line when Chromium dies, after cleaning up', async () => {
    const agent = await startAgent('agent-crash');
    const { browser } = await health(agent);
    process.kill(browser.pid, 'SIGKILL');
    expect((await agent.exited).code).toBe(3);
    expect(agent.output()).toContain('chromium exited unexpectedly (code null, signal SIGKILL)');
    expect(await processGroupMembers(browser.pid)).toEqual([]);
    expect(existsSync(agent.workDir)).toBe(false);
  });

  it('shuts down cleanly once no service has asked for /health for AGENT_ORPHAN_TIMEOUT_MS, but not while a client is connected', async () => {
    const agent = await startAgent('agent-orphan', {}, { env: { AGENT_ORPHAN_TIMEOUT_MS: '1500' } });
    const { browser } = await health(agent);
    // A connected client keeps it alive past the timeout, with nobody asking for /health.
    const client = new WebSocket(`${agent.url.replace('http', 'ws')}/cdp`, { headers: agent.auth });
    await new Promise((resolve, reject) => client.once('open', resolve).once('error', reject));
    await new Promise((resolve) => setTimeout(resolve, 3500));
    expect(agent.child.exitCode).toBeNull();
    client.close();
    expect(await agent.exited).toEqual({ code: 0, signal: null });
    expect(agent.output()).toMatch(/orphaned: no health check from the service for \d+ s and no client/);
    expect(await processGroupMembers(browser.pid)).toEqual([]);
    expect(existsSync(agent.workDir)).toBe(false);
  }, 30_000);

  it('starts even when the start URL cannot be reached, and never takes it for a switch', async () => {
    const unreachable = await startAgent('agent-bad-url', { startUrl: 'http://127.0.0.1:1/' });
    expect((await health(unreachable)).status).toBe('ready');
    unreachable.child.kill('SIGTERM');
    expect((await unreachable.exited).code).toBe(0);
    const aSwitch = await startAgent('agent-switch-url', { startUrl: '--renderer-cmd-prefix=/bin/false' });
    expect((await health(aSwitch)).status).toBe('ready');
    expect(aSwitch.output()).toContain('start URL is not an http(s) URL');
    aSwitch.child.kill('SIGTERM');
    expect((await aSwitch.exited).code).toBe(0);
  });

  it('answers 503 while Chromium starts, and a SIGTERM then stops it at once, cleanly', async () => {
    // Not under scratch nor /tmp: the browser's mount namespace hides both (agent/src/isolation.ts).
    const fakeDir = await fakeChromiumDir();
    onTestFinished(() => rm(fakeDir, { recursive: true, force: true }));
    const slowChromium = path.join(fakeDir, 'slow-chromium.sh');
    await writeFile(slowChromium, '#!/bin/bash\nexec -a bp-slow-chromium sleep 60\n', { mode: 0o755 });
    const agent = await startAgent('agent-slow', {}, { env: { CHROME_PATH: slowChromium }, until: 'starting' });
    const response = await fetch(`${agent.url}/health`, { headers: agent.auth });
    expect(response.status).toBe(503);
    expect(await response.json()).toMatchObject({ status: 'starting', browser: null });
    const stopping = Date.now();
    agent.child.kill('SIGTERM');
    expect(await agent.exited).toEqual({ code: 0, signal: null });
    expect(Date.now() - stopping).toBeLessThan(3000);
    expect(existsSync(agent.workDir)).toBe(false);
    expect(execFileSync('ps', ['-eo', 'args']).toString()).not.toContain('bp-slow-chromium');
  });

  it('holds GET /health?wait_ms while Chromium starts: answers once ready, or once it gives up (here a SIGTERM)', async () => {
    // A real Chromium: the held answer is the ready one, not the 503 of the moment it was asked.
    const agent = await startAgent('agent-wait', {}, { until: 'starting' });
    onTestFinished(async () => {
      agent.child.kill('SIGTERM');
      await agent.exited;
    });
    const response = await fetch(`${agent.url}/health?wait_ms=5000`, { headers: agent.auth });
    expect(response.status).toBe(200);
    expect(await response.json()).toMatchObject({ status: 'ready', browser: { pid: expect.any(Number) } });

    // A Chromium that never answers: the held answer comes when the agent stops, not after wait_ms.
    const fakeDir = await fakeChromiumDir();
    onTestFinished(() => rm(fakeDir, { recursive: true, force: true }));
    const slowChromium = path.join(fakeDir, 'slow-chromium.sh');
    await writeFile(slowChromium, '#!/bin/bash\nexec -a bp-slow-chromium sleep 60\n', { mode: 0o755 });
    const slow = await startAgent('agent-wait-slow', {}, { env: { CHROME_PATH: slowChromium }, until: 'starting' });
    const held = fetch(`${slow.url}/health?wait_ms=5000`, { headers: slow.auth }).then(async (r) => ({ status: r.status, body: (await r.json()) as { status: string } }));
    await new Promise((resolve) => setTimeout(resolve, 300));
    slow.child.kill('SIGTERM');
    expect(await held).toEqual({ status: 503, body: expect.objectContaining({ status: 'stopping' }) });
    expect((await slow.exited).code).toBe(0);
  });

  it('answers /health?until=spawned at the spawn, and serves what is asked while Chromium starts once it answers', async () => {
    // A Chromium that takes two seconds more to start: the service answers its create at the
    // spawn, so a client's first request and CDP connection come while Chromium starts.
    const fakeDir = await fakeChromiumDir();
    onTestFinished(() => rm(fakeDir, { recursive: true, force: true }));
    const lateChromium = path.join(fakeDir, 'late-chromium.sh');
    await writeFile(lateChromium, `#!/bin/bash\nsleep 2\nexec ${process.env.CHROME_PATH ?? '/usr/lib/chromium/chromium'} "$@"\n`, { mode: 0o755 });
    const agent = await startAgent('agent-early', {}, { env: { CHROME_PATH: lateChromium }, until: 'starting' });
    onTestFinished(async () => {
      agent.child.kill('SIGTERM');
      await agent.exited;
    });
    const spawned = await fetch(`${agent.url}/health?wait_ms=5000&until=spawned`, { headers: agent.auth });
    expect(spawned.status).toBe(503);
    expect(await spawned.json()).toMatchObject({ status: 'starting', spawned: true, browser: null });

    // Asked now, answered once Chromium is up (before, both were refused with 503).
    const version = fetch(`${agent.url}/json/version`, { headers: agent.auth }).then(async (r) => ({ status: r.status, body: (await r.json()) as Record<string, string> }));
    const client = new WebSocket(`${agent.url.replace('http', 'ws')}/cdp`, { headers: agent.auth });
    onTestFinished(() => client.close());
    const answer = new Promise<any>((resolve, reject) => {
      client.once('open', () => client.send(JSON.stringify({ id: 1, method: 'Browser.getVersion' })));
      client.once('message', (data: Buffer) => resolve(JSON.parse(data.toString('utf8'))));
      client.once('error', reject);
      client.once('unexpected-response', (_request, response) => reject(new Error(`upgrade answered ${response.statusCode}`)));
    });
    expect(await answer).toMatchObject({ id: 1, result: { product: expect.stringMatching(/^Chrome\//) } });
    expect(await version).toMatchObject({ status: 200, body: { Browser: expect.stringMatching(/^Chrome\//) } });
    expect(await health(agent)).toMatchObject({ status: 'ready', spawned: true });
  });

  it('refuses to start without a launch spec (exit 2)', async () => {
    const child = spawn(process.execPath, [agentEntry], { env: { PATH: process.env.PATH }, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const code = await new Promise((resolve) => child.once('exit', resolve));
    expect(code).toBe(2);
    expect(stderr).toContain('AGENT_SPEC');
  });
});

describe('an agent started on port 0', () => {
  it('chooses its own port and reports it in AGENT_PORT_FILE, where it then answers', async () => {
    // The local runtime starts every agent this way: a port picked by the service and handed
    // over could be taken by another socket before the agent binds it (EADDRINUSE at ~50 browsers).
    const portFile = path.join(scratch, 'chosen.port');
    const child = spawn(process.execPath, [agentEntry], {
      env: { PATH: process.env.PATH, AGENT_SPEC: JSON.stringify({ browserId: 'agent-port-zero' }), AGENT_TOKEN: testAgentTokens('agent-port-zero'), AGENT_PORT: '0', AGENT_PORT_FILE: portFile, AGENT_WORK_DIR: path.join(scratch, 'agent-port-zero') },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const exited = new Promise((resolve) => child.once('exit', resolve));
    try {
      let port: number | undefined;
      for (let tries = 0; port === undefined; tries++) {
        if (existsSync(portFile)) port = Number(readFileSync(portFile, 'utf8').trim());
        else if (tries > 300) throw new Error(`no port reported: ${output}`);
        else await new Promise((resolve) => setTimeout(resolve, 50));
      }
      expect(port).toBeGreaterThan(0);
      const listening = output.split('\n').filter(Boolean).map((line) => JSON.parse(line) as { msg?: string; port?: number }).find((line) => line.msg === 'listening');
      expect(listening?.port).toBe(port);
      const answer = (await (await fetch(`http://127.0.0.1:${port}/health`, { headers: agentAuth('agent-port-zero') })).json()) as { browser_id: string };
      expect(answer.browser_id).toBe('agent-port-zero');
      // Written whole through a rename: no temporary file is left beside it.
      expect(readdirSync(scratch).filter((name) => name.startsWith('chosen.port.'))).toEqual([]);
    } finally {
      child.kill('SIGTERM');
      await exited;
    }
  });
});
