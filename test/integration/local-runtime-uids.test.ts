import { spawn } from 'node:child_process';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { chmod, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../api/src/logger.js';
import { isProcessAlive, processesOfUids, processGroupMembers, signalProcessGroup, waitForProcessGroupExit } from '../../lib/process-group.js';
import type { BrowserLaunchSpec } from '../../contract/browser-runtime.js';
import type { BrowserRecord } from '../../api/src/runtime/browser-records.js';
import { createLocalRuntime, type LocalRuntime } from '../../api/src/runtime/local-runtime.js';
import { UidPool, type UidRange } from '../../api/src/runtime/uid-pool.js';
import { testAgentTokens } from '../support/agent-access.js';

/**
 * The local runtime's session uids (api/src/runtime/uid-pool.ts) with real agents
 * and Chromium: each live browser has a uid no other has, a uid comes back only after
 * its browser's processes and files are gone, and a restarted service keeps the uids
 * its records name. The range is this file's own, clear of the default one other test
 * files' services use.
 */

const log = createLogger(process.env.TEST_LOG_LEVEL ?? 'warn');
const RANGE: UidRange = { base: 1_300_000 + (process.pid % 1000) * 10, count: 3 };

let scratch: string;
let stateDir: string;
let workRoot: string;
const runtimes: LocalRuntime[] = [];

const newRuntime = (standbyAgents = 0) => {
  const runtime = createLocalRuntime({ stateDir, workRoot, log, agentTokens: testAgentTokens, standbyAgents, sessionUids: RANGE });
  runtimes.push(runtime);
  return runtime;
};
const never = () => new AbortController().signal;
const spec = (browserId: string): BrowserLaunchSpec => ({
  browserId,
  orgId: 'org-test',
  projectId: 'project-test',
  headless: true,
  stealth: false,
  kioskMode: false,
  viewport: { width: 800, height: 600 },
  chromePolicy: {},
  labels: {},
});
const recordOf = async (browserId: string) => JSON.parse(await readFile(path.join(stateDir, `${browserId}.json`), 'utf8')) as BrowserRecord;
const uidOfProcess = (pid: number) => Number(/^Uid:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]);

async function launch(runtime: LocalRuntime, browserId: string): Promise<number> {
  const observed = await runtime.launch(spec(browserId), { signal: never() });
  expect(observed.phase, observed.reason).toBe('Ready');
  const record = await recordOf(browserId);
  expect(record.chromiumUid).toBeDefined();
  // The uid on record is the one Chromium and its work dir really have.
  expect(uidOfProcess(record.browserPid!)).toBe(record.chromiumUid);
  expect(statSync(record.workDir).uid).toBe(record.chromiumUid);
  return record.chromiumUid!;
}

beforeAll(async () => {
  scratch = await mkdtemp(path.join(os.tmpdir(), 'bp-uids-'));
  // Every session uid passes through to its own dir.
  await chmod(scratch, 0o711);
  stateDir = path.join(scratch, 'state');
  workRoot = path.join(scratch, 'b');
});

afterAll(async () => {
  for (const runtime of runtimes) await runtime.terminateAll(2000).catch(() => undefined);
  await rm(scratch, { recursive: true, force: true });
});

describe('session uids of the local runtime', () => {
  it('gives concurrent browsers distinct uids (standby claims included), refuses one past the range, and reuses a uid only once its browser is gone', async () => {
    const runtime = newRuntime(1);
    const ids = ['u-a', 'u-b', 'u-c'];
    const uids = await Promise.all(ids.map((id) => launch(runtime, id)));
    console.log(`  uids of ${ids.join(', ')}: ${uids.join(', ')}`);
    expect(new Set(uids).size).toBe(3);
    for (const uid of uids) expect(uid >= RANGE.base && uid < RANGE.base + RANGE.count).toBe(true);
    await expect(runtime.launch(spec('u-d'), { signal: never() })).rejects.toThrow(/no free session uid/);

    const [uidA] = uids;
    const workA = (await recordOf('u-a')).workDir;
    await runtime.terminate('u-a', { graceMs: 2000 });
    expect((await processesOfUids(uidA!, 1)).size).toBe(0);
    expect(existsSync(workA)).toBe(false);
    expect(await launch(runtime, 'u-d')).toBe(uidA);
    for (const id of ['u-b', 'u-c', 'u-d']) await runtime.terminate(id, { graceMs: 2000 });
  }, 90_000);

  it('after a restart keeps the uid of a recorded browser whose processes died with the service, until that browser is cleaned up', async () => {
    const first = newRuntime();
    const uidA = await launch(first, 'r-a');
    const record = await recordOf('r-a');
    // The service dies (close forgets without stopping), then the browser does: its files
    // stay, owned by its uid, and no process runs as it any more.
    await first.close();
    for (const pid of [record.agentPid, record.browserPid!]) signalProcessGroup(pid, 'SIGKILL');
    for (const pid of [record.agentPid, record.browserPid!]) expect(await waitForProcessGroupExit(pid, 5000)).toBe(true);
    // A process of the uid outside those groups (Chromium's crash handler) may take a moment longer to go.
    await expect.poll(async () => (await processesOfUids(uidA, 1)).size, { timeout: 10_000 }).toBe(0);
    expect(statSync(record.workDir).uid).toBe(uidA);

    const second = newRuntime();
    const uidB = await launch(second, 'r-b');
    console.log(`  dead browser's uid ${uidA}, new browser's ${uidB}`);
    expect(uidB).not.toBe(uidA);
    // Cleaning the dead browser up gives its uid back.
    expect((await second.observe('r-a'))?.phase).toMatch(/Gone|Failed/);
    await second.terminate('r-a', { graceMs: 0 });
    expect(existsSync(record.workDir)).toBe(false);
    expect(await launch(second, 'r-c')).toBe(uidA);
    for (const id of ['r-b', 'r-c']) await second.terminate(id, { graceMs: 2000 });
    expect(await processGroupMembers(record.browserPid!)).toEqual([]);
  }, 90_000);

  it('kills what still runs as a uid when its browser ends, before giving the uid back', async () => {
    const runtime = newRuntime();
    const uid = await launch(runtime, 'k-a');
    // A process of the session that left Chromium's process group (as a compromised browser could).
    const stray = spawn('setpriv', [`--reuid=${uid}`, `--regid=${uid}`, '--clear-groups', '--', 'sleep', '300'], { detached: true, stdio: 'ignore' });
    stray.unref();
    const exited = new Promise((resolve) => stray.once('exit', (_code, signal) => resolve(signal)));
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect((await processesOfUids(uid, 1)).get(uid)).toContain(stray.pid);
    await runtime.terminate('k-a', { graceMs: 2000 });
    expect(isProcessAlive(stray.pid!)).toBe(false);
    expect(await exited).toBe('SIGKILL');
    expect((await processesOfUids(uid, 1)).size).toBe(0);
    expect(await launch(runtime, 'k-b')).toBe(uid);
    await runtime.terminate('k-b', { graceMs: 2000 });
  }, 60_000);

  it('never gives two services on one host the same uid: a live holder\'s lock is respected, a dead one\'s taken over', async () => {
    // Two pools stand for two services sharing the default range (a second make run, test
    // workers): the second skips the first's uid although no process runs as it yet.
    const lockDir = await mkdtemp(path.join(os.tmpdir(), 'bp-uid-locks-'));
    const range: UidRange = { base: RANGE.base + 5, count: 3 };
    try {
      const first = new UidPool(range, log, lockDir);
      const second = new UidPool(range, log, lockDir);
      const a = await first.allocate('browser-a');
      const b = await second.allocate('browser-b');
      expect(a).toBe(range.base);
      expect(b).toBe(range.base + 1);
      await first.release(a, 'browser-a');
      expect(await second.allocate('browser-c')).toBe(range.base);
      // A lock left by a process that is gone (a killed service) is taken over.
      const dead = spawn('true');
      await new Promise((resolve) => dead.once('exit', resolve));
      await writeFile(path.join(lockDir, String(range.base + 2)), `${dead.pid}\n`);
      expect(await first.allocate('browser-d')).toBe(range.base + 2);
      expect(readFileSync(path.join(lockDir, String(range.base + 2)), 'utf8').trim()).toBe(String(process.pid));
    } finally {
      await rm(lockDir, { recursive: true, force: true });
    }
  });

  it('allocates from a scan made ahead (prepare) as safely as from its own: a released uid is free, a taken-over one is checked again', async () => {
    const lockDir = await mkdtemp(path.join(os.tmpdir(), 'bp-uid-locks-'));
    const range: UidRange = { base: RANGE.base + 8, count: 2 };
    const asUid = (uid: number) => spawn('sleep', ['60'], { uid, gid: uid, stdio: 'ignore' });
    const stop = async (child: ReturnType<typeof asUid>) => {
      child.kill('SIGKILL');
      await new Promise((resolve) => (child.exitCode !== null || child.signalCode !== null ? resolve(undefined) : child.once('exit', resolve)));
    };
    try {
      const pool = new UidPool(range, log, lockDir);
      const a = await pool.allocate('browser-a');
      expect(a).toBe(range.base);
      const running = asUid(a);
      await eventuallyRuns(a);
      pool.prepare(); // sees a's process
      await stop(running);
      await pool.release(a, 'browser-a');
      // The scan was made while a ran: the release tells it a is free now.
      expect(await pool.allocate('browser-b')).toBe(range.base);
      await pool.release(range.base, 'browser-b');

      // A service that died left a lock and a browser started after the scan was made:
      // the takeover looks again, and the uid is not handed out.
      pool.prepare();
      await new Promise((resolve) => setTimeout(resolve, 500)); // the scan is done
      const dead = spawn('true');
      await new Promise((resolve) => dead.once('exit', resolve));
      await writeFile(path.join(lockDir, String(range.base)), `${dead.pid}\n`);
      const leftover = asUid(range.base);
      await eventuallyRuns(range.base);
      try {
        expect(await pool.allocate('browser-c')).toBe(range.base + 1);
      } finally {
        await stop(leftover);
      }
    } finally {
      await rm(lockDir, { recursive: true, force: true });
    }
  });
});

async function eventuallyRuns(uid: number): Promise<void> {
  for (let tries = 0; (await processesOfUids(uid, 1)).size === 0; tries++) {
    if (tries > 100) throw new Error(`no process of uid ${uid}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

