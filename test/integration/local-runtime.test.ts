import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { chmod, mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../api/src/logger.js';
import { isProcessAlive, processGroupMembers } from '../../lib/process-group.js';
import type { BrowserLaunchSpec, ObservedBrowser } from '../../contract/browser-runtime.js';
import { createLocalRuntime, type LocalRuntime } from '../../api/src/runtime/local-runtime.js';
import { agentAuth, testAgentTokens } from '../support/agent-access.js';
import { eventually } from '../support/eventually.js';
import { startTestPageServer, type TestPageServer } from '../support/test-page-server.js';

/** The local BrowserRuntime with real agents and real Chromium. */

const root = path.resolve(import.meta.dirname, '../..');
const log = createLogger(process.env.TEST_LOG_LEVEL ?? 'warn');

function assertAgentBuilt(): void {
  for (const source of readdirSync(path.join(root, 'agent/src')).filter((name) => name.endsWith('.ts'))) {
    const built = path.join(root, 'dist/agent/src', source.replace(/\.ts$/, '.js'));
    if (!existsSync(built) || statSync(built).mtimeMs < statSync(path.join(root, 'agent/src', source)).mtimeMs) {
      throw new Error(`the agent build is missing or stale (${source}): run node_modules/.bin/tsc -p tsconfig.build.json`);
    }
  }
}

let scratch: string;
let stateDir: string;
let workRoot: string;
let runtime: LocalRuntime;
let pages: TestPageServer;

const newRuntime = () => createLocalRuntime({ stateDir, workRoot, log, agentTokens: testAgentTokens });
const never = () => new AbortController().signal;

function spec(browserId: string, labels: Record<string, string> = {}): BrowserLaunchSpec {
  return {
    browserId,
    orgId: 'org-test',
    projectId: 'project-test',
    headless: true,
    stealth: false,
    kioskMode: false,
    viewport: { width: 1280, height: 800 },
    chromePolicy: {},
    labels,
  };
}

interface AgentPids {
  agentPid: number;
  browserPid: number;
}
const pidsOf = async (browserId: string): Promise<AgentPids> =>
  JSON.parse(await readFile(path.join(stateDir, `${browserId}.json`), 'utf8')) as AgentPids;

/** Every process, ours or not, whose command line mentions this browser's work dir. */
const chromiumProcessesOf = (browserId: string) =>
  readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry))
    .filter((pid) => {
      try {
        return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(path.join(workRoot, browserId));
      } catch {
        return false;
      }
    });

beforeAll(async () => {
  assertAgentBuilt();
  // Short: Chromium's singleton socket path under the work dirs is limited to 107 bytes.
  scratch = await mkdtemp(path.join(os.tmpdir(), 'bp-rt-'));
  await chmod(scratch, 0o711);
  stateDir = path.join(scratch, 'state');
  workRoot = path.join(scratch, 'b');
  runtime = newRuntime();
  pages = await startTestPageServer({ '/title': '<title>Through the local runtime</title>' });
});

afterAll(async () => {
  await runtime?.terminateAll(2000);
  expect(await runtime.list()).toEqual([]);
  expect(readdirSync(workRoot)).toEqual([]);
  await pages?.close();
  await rm(scratch, { recursive: true, force: true });
});

describe('a launched browser', () => {
  let launched: ObservedBrowser;
  beforeAll(async () => {
    const started = Date.now();
    launched = await runtime.launch(spec('rt-shared', { pool: 'p1' }), { signal: never() });
    log.info({ ms: Date.now() - started }, 'launch through the runtime');
  });

  it('is Ready with an agent URL that Playwright can drive over CDP', async () => {
    expect(launched).toMatchObject({ browserId: 'rt-shared', phase: 'Ready', labels: { pool: 'p1' } });
    expect(launched.startedAt).toBeInstanceOf(Date);
    const browser = await chromium.connectOverCDP(`${launched.agentUrl!.replace('http', 'ws')}/cdp`, { headers: agentAuth('rt-shared') });
    try {
      const health: any = await (await fetch(`${launched.agentUrl}/health`, { headers: agentAuth('rt-shared') })).json();
      expect(health).toMatchObject({ status: 'ready', connections: 1, idle_since: null });
      const page = await browser.contexts()[0]!.newPage();
      await page.goto(`${pages.url}/title`);
      expect(await page.title()).toBe('Through the local runtime');
      await page.close();
    } finally {
      await browser.close();
    }
  });

  it('is returned again, not relaunched, by a second launch of the same id', async () => {
    const before = await pidsOf('rt-shared');
    const again = await runtime.launch(spec('rt-shared', { pool: 'p1' }), { signal: never() });
    expect(again).toMatchObject({ phase: 'Ready', agentUrl: launched.agentUrl });
    expect(await pidsOf('rt-shared')).toEqual(before);
  });

  it('is re-adopted by a new runtime on the same state dir', async () => {
    const restarted = newRuntime();
    const listed = await restarted.list();
    expect(listed).toContainEqual(expect.objectContaining({ browserId: 'rt-shared', phase: 'Ready', agentUrl: launched.agentUrl }));
    expect(await restarted.observe('rt-shared')).toMatchObject({ phase: 'Ready', labels: { pool: 'p1' } });
    await restarted.close();
    expect(await runtime.observe('rt-shared')).toMatchObject({ phase: 'Ready' });
  });
});

describe('launch and terminate', () => {
  it('starts one agent for concurrent launches of one id', async () => {
    const [a, b] = await Promise.all([
      runtime.launch(spec('rt-concurrent'), { signal: never() }),
      runtime.launch(spec('rt-concurrent'), { signal: never() }),
    ]);
    expect(a, a.reason).toMatchObject({ phase: 'Ready' });
    expect(b.agentUrl).toBe(a.agentUrl);
    await runtime.terminate('rt-concurrent', { graceMs: 2000 });
  });

  it('terminate closes the browser and leaves no process and no file; a second terminate succeeds', async () => {
    await runtime.launch(spec('rt-terminate'), { signal: never() });
    const { agentPid, browserPid } = await pidsOf('rt-terminate');
    expect(chromiumProcessesOf('rt-terminate').length).toBeGreaterThan(0);
    await runtime.terminate('rt-terminate', { graceMs: 3000 });
    expect(isProcessAlive(agentPid)).toBe(false);
    expect(await processGroupMembers(browserPid)).toEqual([]);
    expect(chromiumProcessesOf('rt-terminate')).toEqual([]);
    expect(existsSync(path.join(workRoot, 'rt-terminate'))).toBe(false);
    expect(existsSync(path.join(stateDir, 'rt-terminate.json'))).toBe(false);
    await runtime.terminate('rt-terminate', { graceMs: 3000 });
    expect(await runtime.observe('rt-terminate')).toBeUndefined();
  });

  it('reports a browser whose Chromium was killed as Failed, with the reason', async () => {
    await runtime.launch(spec('rt-crash'), { signal: never() });
    const { browserPid } = await pidsOf('rt-crash');
    process.kill(browserPid, 'SIGKILL');
    const observed = await eventually(() => runtime.observe('rt-crash'), { timeoutMs: 5000, intervalMs: 25, accept: (o) => o?.phase === 'Failed' });
    expect(observed!.reason).toContain('agent exited with code 3');
    expect(observed!.reason).toContain('chromium exited unexpectedly (code null, signal SIGKILL)');
    expect(chromiumProcessesOf('rt-crash')).toEqual([]);
    await runtime.terminate('rt-crash', { graceMs: 1000 });
    expect(await runtime.observe('rt-crash')).toBeUndefined();
  });

  it('after a restart reports a browser whose agent died as Gone, kills its orphaned Chromium and removes its files', async () => {
    const first = newRuntime();
    await first.launch(spec('rt-orphan'), { signal: never() });
    await first.close();
    const { agentPid, browserPid } = await pidsOf('rt-orphan');
    process.kill(-agentPid, 'SIGKILL');
    await expect.poll(() => isProcessAlive(agentPid), { timeout: 5000, interval: 25 }).toBe(false);
    expect(isProcessAlive(browserPid)).toBe(true);
    const restarted = newRuntime();
    const listed = await restarted.list();
    expect(listed).toContainEqual(expect.objectContaining({ browserId: 'rt-orphan', phase: 'Gone', reason: expect.stringContaining('not running') }));
    expect(chromiumProcessesOf('rt-orphan')).toEqual([]);
    expect(await processGroupMembers(browserPid)).toEqual([]);
    expect(existsSync(path.join(workRoot, 'rt-orphan'))).toBe(false);
    expect(existsSync(path.join(stateDir, 'rt-orphan.json'))).toBe(false);
    expect((await restarted.list()).map((o) => o.browserId)).not.toContain('rt-orphan');
  });

  it('reports Starting during a launch, and a terminate meanwhile waits for it and leaves nothing', async () => {
    const launch = runtime.launch(spec('rt-early'), { signal: never() });
    expect(await runtime.observe('rt-early')).toMatchObject({ phase: 'Starting' });
    await runtime.terminate('rt-early', { graceMs: 2000 });
    expect((await launch).phase).toBe('Ready');
    expect(chromiumProcessesOf('rt-early')).toEqual([]);
    expect(await runtime.observe('rt-early')).toBeUndefined();
  });

  it('reports a browser whose Chromium cannot start as Failed, with the agent\'s reason', async () => {
    const broken = createLocalRuntime({ stateDir, workRoot, log, chromePath: '/bin/false', agentTokens: testAgentTokens });
    const observed = await broken.launch(spec('rt-broken'), { signal: never() });
    expect(observed.phase).toBe('Failed');
    expect(observed.reason).toContain('agent exited with code 1');
    expect(observed.reason).toContain('Chromium exited during start-up (code 1');
    await broken.terminate('rt-broken', { graceMs: 1000 });
    expect(existsSync(path.join(stateDir, 'rt-broken.json'))).toBe(false);
  });

  it('an aborted launch rejects and leaves nothing behind', async () => {
    const controller = new AbortController();
    setTimeout(() => controller.abort(new Error('caller gave up')), 100);
    await expect(runtime.launch(spec('rt-aborted'), { signal: controller.signal })).rejects.toThrow('caller gave up');
    expect(chromiumProcessesOf('rt-aborted')).toEqual([]);
    expect(existsSync(path.join(workRoot, 'rt-aborted'))).toBe(false);
    expect(await runtime.observe('rt-aborted')).toBeUndefined();
  });
});
