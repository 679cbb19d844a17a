import { spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { chmod, mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../api/src/logger.js';
import type { BrowserLaunchSpec } from '../../contract/browser-runtime.js';
import { freePort, spawnAgent } from '../../api/src/runtime/agent-process.js';
import { fetchHealth } from '../../contract/agent-client.js';
import { createLocalRuntime } from '../../api/src/runtime/local-runtime.js';
import { testAgentTokens } from '../support/agent-access.js';
import { eventually } from '../support/eventually.js';

/**
 * Standby agents (agent/src/standby.ts): the local runtime keeps one agent started and
 * waiting, so a launch skips Node's start and the agent's module loading. Real agents,
 * real Chromium.
 */

const root = path.resolve(import.meta.dirname, '../..');
const agentEntry = path.join(root, 'dist/agent/src/main.js');
const log = createLogger(process.env.TEST_LOG_LEVEL ?? 'warn');

let scratch: string;
let stateDir: string;
let workRoot: string;

function spec(browserId: string): BrowserLaunchSpec {
  return { browserId, orgId: 'o', projectId: 'p', headless: true, stealth: false, kioskMode: false, viewport: { width: 800, height: 600 }, chromePolicy: {}, labels: {} };
}

/** Pids of standby agents (AGENT_STANDBY=1 in their environment) whose parent is `parent`. */
function standbyAgents(parent = process.pid): number[] {
  return readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry))
    .filter((pid) => {
      try {
        const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
        const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
        return ppid === parent && readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0').includes('AGENT_STANDBY=1');
      } catch {
        return false;
      }
    })
    .map(Number);
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

beforeAll(async () => {
  scratch = await mkdtemp(path.join(os.tmpdir(), 'bp-sb-'));
  await chmod(scratch, 0o711);
  stateDir = path.join(scratch, 'state');
  workRoot = path.join(scratch, 'b');
});
afterAll(async () => {
  await rm(scratch, { recursive: true, force: true });
});

describe('the local runtime with a standby agent', () => {
  it('hands the standby agent to the next launch, starts a new one, and stops it with terminateAll', async () => {
    const runtime = createLocalRuntime({ stateDir, workRoot, log, agentTokens: testAgentTokens });
    try {
      // Claimed agents keep AGENT_STANDBY=1 in their environment: count the others.
      const claimed: number[] = [];
      const waitingNow = () => {
        const pids = standbyAgents().filter((pid) => !claimed.includes(pid));
        return pids.length === 1 ? pids[0] : undefined;
      };
      const waiting = await eventually(waitingNow, { timeoutMs: 15_000, intervalMs: 25, what: 'a standby agent' });
      const launched = await runtime.launch(spec('sb-one'), { signal: new AbortController().signal });
      expect(launched.phase).toBe('Ready');
      const record = JSON.parse(await readFile(path.join(stateDir, 'sb-one.json'), 'utf8')) as { agentPid: number; logFile: string };
      expect(record.agentPid).toBe(waiting);
      claimed.push(waiting);
      // The agent answers ready on /health a moment before its log line reaches the file.
      const agentLog = await eventually(
        async () => {
          const text = await readFile(record.logFile, 'utf8');
          return /"browser_id":"sb-one"[^\n]*"msg":"browser ready"/.test(text) ? text : undefined;
        },
        { timeoutMs: 15_000, intervalMs: 25, what: 'the claimed agent to log its browser ready' },
      );
      expect(agentLog).toContain('standby agent claimed');
      // A fresh standby takes its place, and serves the next launch.
      const next = await eventually(waitingNow, { timeoutMs: 15_000, intervalMs: 25, what: 'the next standby' });
      expect((await runtime.launch(spec('sb-two'), { signal: new AbortController().signal })).phase).toBe('Ready');
      expect((JSON.parse(await readFile(path.join(stateDir, 'sb-two.json'), 'utf8')) as { agentPid: number }).agentPid).toBe(next);
      claimed.push(next);
      await eventually(waitingNow, { timeoutMs: 15_000, intervalMs: 25, what: 'a third standby' });
    } finally {
      await runtime.terminateAll(2000);
    }
    await eventually(() => (standbyAgents().length === 0 ? true : undefined), { timeoutMs: 5000, intervalMs: 25, what: 'no standby left' });
    expect(await runtime.list()).toEqual([]);
  }, 60_000);

  it('keeps none with standbyAgents: 0, and each launch starts its own agent', async () => {
    const runtime = createLocalRuntime({ stateDir, workRoot, log, standbyAgents: 0, agentTokens: testAgentTokens });
    try {
      expect((await runtime.launch(spec('sb-none'), { signal: new AbortController().signal })).phase).toBe('Ready');
      const record = JSON.parse(await readFile(path.join(stateDir, 'sb-none.json'), 'utf8')) as { logFile: string };
      expect(await readFile(record.logFile, 'utf8')).not.toContain('standby agent claimed');
      expect(standbyAgents()).toEqual([]);
    } finally {
      await runtime.terminateAll(2000);
    }
  }, 30_000);
});

describe('a standby agent', () => {
  it('refuses a claim without its token or without a valid spec, and stays claimable', async () => {
    const port = await freePort();
    const token = 'standby-token-'.padEnd(40, 'x');
    const child = await spawnAgent({ agentEntry, port, standbyToken: token, logFile: path.join(scratch, 'standby-bad.log'), logLevel: 'info' });
    try {
      const url = `http://127.0.0.1:${port}`;
      await eventually(async () => ((await fetchHealth({ url, token }, 500))?.status === 'standby' ? true : undefined), { timeoutMs: 15_000, intervalMs: 25, what: 'standby' });
      const body = JSON.stringify({ spec: { browserId: 'claimed-by-a-stranger' }, workDir: path.join(scratch, 'stranger') });
      for (const authorization of [undefined, 'Bearer wrong', `Bearer ${token}x`, token]) {
        const refused = await fetch(`${url}/start`, { method: 'POST', body, headers: authorization ? { authorization } : {} });
        expect(refused.status, authorization).toBe(401);
      }
      const bad = await fetch(`${url}/start`, { method: 'POST', body: JSON.stringify({ spec: { browserId: '../x' } }), headers: { authorization: `Bearer ${token}` } });
      expect(bad.status).toBe(400);
      expect(((await bad.json()) as { message: string }).message).toContain('browserId');
      // A claim must hand over the browser's agent token, which the claimed agent then requires.
      const spec = { browserId: 'claimed-without-token' };
      const tokenless = await fetch(`${url}/start`, { method: 'POST', body: JSON.stringify({ spec, workDir: path.join(scratch, 'tokenless') }), headers: { authorization: `Bearer ${token}` } });
      expect(tokenless.status).toBe(400);
      expect(((await tokenless.json()) as { message: string }).message).toContain('token');
      // A web page cannot even ask: Origin (or Sec-Fetch-Site) is refused before anything else.
      const fromBrowsers: Record<string, string>[] = [{ origin: 'http://127.0.0.1:1' }, { 'sec-fetch-site': 'cross-site' }];
      for (const headers of fromBrowsers) {
        const fromPage = await fetch(`${url}/start`, { method: 'POST', body, headers: { ...headers, authorization: `Bearer ${token}` } });
        expect(fromPage.status).toBe(403);
        expect(((await fetch(`${url}/health`, { headers })).status)).toBe(403);
      }
      expect((await fetchHealth({ url, token }, 500))?.status).toBe('standby');
    } finally {
      child.kill('SIGTERM');
      await new Promise((resolve) => child.once('exit', resolve));
    }
  }, 30_000);

  it('will not start without a token (exit 2)', async () => {
    const child = spawn(process.execPath, [agentEntry], { env: { PATH: process.env.PATH, AGENT_STANDBY: '1' }, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    expect(await new Promise((resolve) => child.once('exit', resolve))).toBe(2);
    expect(stderr).toContain('AGENT_STANDBY_TOKEN');
  });

  it('exits by itself when the process that started it is gone', async () => {
    // A parent that starts a standby agent, prints its pid and exits at once.
    const script = `
      import { spawn } from 'node:child_process';
      const child = spawn(process.execPath, [${JSON.stringify(agentEntry)}], {
        detached: true, stdio: 'ignore', env: { ...process.env, AGENT_STANDBY: '1', AGENT_PORT: '0', AGENT_PARENT_PID: String(process.pid), AGENT_STANDBY_TOKEN: 'x'.repeat(32) },
      });
      child.unref();
      console.log(child.pid);`;
    const parent = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    parent.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
    await new Promise((resolve) => parent.once('exit', resolve));
    const standby = Number(out.trim());
    expect(standby).toBeGreaterThan(0);
    await eventually(() => (alive(standby) ? undefined : true), { timeoutMs: 10_000, intervalMs: 25, what: 'the orphaned standby to exit' });
  }, 30_000);
});
