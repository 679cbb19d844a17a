import type { ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { randomBytes } from 'node:crypto';
import { chmod, mkdir, rename, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Logger } from 'pino';
import { isProcessAlive, processGroupMembers, signalProcessGroup, waitForProcessGroupExit } from '../../../lib/process-group.js';
import { packageRoot } from '../paths.js';
import { BrowserResetError, BrowserSettingsError, type BrowserLaunchSpec, type BrowserRuntime, type ObservedBrowser } from '../../../contract/browser-runtime.js';
import { agentGroupsStartedFor, describeExit, isProcessOf, lastAgentWords, processGroupsMentioning, readReportedPort, spawnAgent, type AgentExit } from './agent-process.js';
import { claimStandbyAgent, fetchHealth, postAgentReset, postAgentSettings, requestAgentShutdown } from '../../../contract/agent-client.js';
import { assertSafeBrowserId, BrowserRecords, type BrowserRecord } from './browser-records.js';
import { DEFAULT_SESSION_UIDS, UidPool, type UidRange } from './uid-pool.js';
import type { AgentEndpoint, AgentTokens } from '../../../contract/agent-client.js';

/**
 * The BrowserRuntime for embedded mode: one agent child process per browser, each in its
 * own process group, recorded in the state dir so a restarted service re-adopts agents
 * that still run. Agents outlive the service on purpose; stopping the service cleanly
 * means calling terminateAll.
 */

export interface LocalRuntimeOptions {
  /** Records (<id>.json) and agent logs (<id>.log); may be private to the service. */
  stateDir: string;
  log: Logger;
  /** The agent token of each browser (agent-client.ts): handed to its agent, presented on every call. */
  agentTokens: AgentTokens;
  /** Default: the built agent, dist/agent/src/main.js. */
  agentEntry?: string;
  chromePath?: string;
  /**
   * Parent of the per-browser work dirs. Chromium's unprivileged user must be able to
   * enter it, so it is not under the state dir (which may sit under /root).
   * Default: <tmp>/browserplane-browsers.
   */
  workRoot?: string;
  /** How long an agent gets to report ready. Default 30 s. */
  launchTimeoutMs?: number;
  /**
   * Agents kept started and waiting (standby), so a launch skips Node's start and the
   * agent's module loading (150-200 ms here). Default 1; 0 turns it off.
   */
  standbyAgents?: number;
  agentLogLevel?: string;
  /** Keeps every browser's traffic off loopback and private networks but these (agent/src/egress.ts). Default: off. */
  egress?: { blockPrivateNetworks: boolean; allowedNetworks?: string | undefined };
  /** The browser file API's limits for every agent (AGENT_FS_*; unset: the agent's defaults). */
  agentFsEnv?: Record<`AGENT_FS_${string}`, string>;
  /**
   * The uids sessions' browsers run as, one each (uid-pool.ts), when the service runs as
   * root. Default: DEFAULT_SESSION_UIDS.
   */
  sessionUids?: UidRange;
}

export type LocalRuntime = BrowserRuntime & {
  /** Terminates every browser this runtime knows, for a clean service stop. */
  terminateAll(graceMs: number): Promise<void>;
  /** Forgets the agents without stopping them (they are re-adopted at the next start). */
  close(): Promise<void>;
};

interface Tracked {
  record: BrowserRecord;
  child?: ChildProcess;
  exit?: AgentExit;
  terminating?: Promise<void>;
  /** Why the runtime gave up on it (launch timeout, found dead after a restart). */
  failure?: string;
  adoptedDead?: boolean;
  /** Spawned, not yet ready. */
  starting?: boolean;
  /** Where a spawned agent reports its port, until it has. */
  portFile?: string;
}

/**
 * Chromium's singleton socket lives under the work dir and a Unix socket path is limited
 * to 107 bytes, so long ids get a short stable name instead of themselves.
 */
function workDirName(browserId: string): string {
  return browserId.length <= 24 ? browserId : createHash('sha256').update(browserId).digest('hex').slice(0, 16);
}

interface Standby {
  child: ChildProcess;
  /** Empty until the agent reported its port. */
  agentUrl: string;
  logFile: string;
  /** The secret its claim carries. */
  token: string;
  /** True once it answers GET /health as a standby. */
  ready: Promise<boolean>;
}

export function createLocalRuntime(options: LocalRuntimeOptions): LocalRuntime {
  const log = options.log.child({ component: 'local-runtime' });
  const records = new BrowserRecords(options.stateDir);
  const agentEntry = options.agentEntry ?? path.join(packageRoot(), 'dist/agent/src/main.js');
  const workRoot = options.workRoot ?? path.join(os.tmpdir(), 'browserplane-browsers');
  const launchTimeoutMs = options.launchTimeoutMs ?? 30_000;
  const tracked = new Map<string, Tracked>();
  const agentOf = (record: BrowserRecord): AgentEndpoint => ({ url: record.agentUrl, token: options.agentTokens(record.browserId) });
  const standbyWanted = Math.max(0, options.standbyAgents ?? 1);
  /** Agents started in standby, not yet claimed. */
  const standbys: Standby[] = [];
  let standbyClosed = false;
  let refilling: Promise<void> | undefined;
  /** Launches in flight, by id, with the spec's labels for observe() before a record exists. */
  const launching = new Map<string, { done: Promise<ObservedBrowser>; labels: Record<string, string> }>();
  // Not root: agents cannot switch uid, so every browser runs as the service's user.
  const uids = process.getuid?.() === 0 ? new UidPool(options.sessionUids ?? DEFAULT_SESSION_UIDS, log) : undefined;
  if (!uids) log.warn('not running as root: every browser runs as this service\'s user, in no namespace of its own, so sessions are not isolated from each other on this host');
  /** The uids named by records on disk, held before the first allocation (after a restart). */
  let recordedUids: Promise<void> | undefined;
  const reserveRecordedUids = () =>
    (recordedUids ??= (async () => {
      for (const id of await records.ids()) {
        const record = await records.read(id).catch(() => undefined);
        if (record?.chromiumUid !== undefined) uids?.reserve(record.chromiumUid, id);
      }
    })().catch((error: unknown) => {
      recordedUids = undefined;
      throw error;
    }));

  const observed = (entry: Tracked, phase: ObservedBrowser['phase'], reason?: string): ObservedBrowser => ({
    browserId: entry.record.browserId,
    phase,
    ...(phase === 'Ready' ? { agentUrl: entry.record.agentUrl } : {}),
    startedAt: new Date(entry.record.startedAt),
    ...(reason ? { reason } : {}),
    labels: entry.record.labels,
  });

  async function failureReason(entry: Tracked): Promise<string> {
    const words = await lastAgentWords(entry.record.logFile);
    const how = entry.exit ? describeExit(entry.exit) : 'agent no longer running';
    return [entry.failure, how, words].filter(Boolean).join(': ');
  }

  /** A record on disk with no entry in memory: adopt the agent if it still serves this browser. */
  async function adopt(browserId: string): Promise<Tracked | undefined> {
    const record = await records.read(browserId);
    if (!record) return undefined;
    const entry: Tracked = { record };
    const health = (await isProcessOf(record.agentPid, record.agentEntry)) ? await fetchHealth(agentOf(record), 2000) : undefined;
    if (health?.browser_id === browserId && health.status === 'ready') {
      log.info({ browser_id: browserId, agent_pid: record.agentPid }, 're-adopted a running browser');
    } else {
      entry.failure = 'agent not running after a service restart';
      entry.exit = { code: null, signal: null };
      entry.adoptedDead = true;
    }
    tracked.set(browserId, entry);
    return entry;
  }

  async function phaseOf(entry: Tracked): Promise<ObservedBrowser> {
    if (entry.terminating) return observed(entry, 'Terminating');
    if (entry.starting) return observed(entry, 'Starting');
    if (!entry.exit && !entry.child && !(await isProcessOf(entry.record.agentPid, entry.record.agentEntry))) {
      entry.exit = { code: null, signal: null };
    }
    if (!entry.exit) return observed(entry, 'Ready');
    const reason = await failureReason(entry);
    const gone = entry.adoptedDead || (entry.exit.code === 0 && !entry.failure);
    return observed(entry, gone ? 'Gone' : 'Failed', reason);
  }

  /** Starts standby agents up to the wanted number, one after the other, off any launch's path. */
  function refillStandbys(): Promise<void> {
    refilling ??= (async () => {
      while (!standbyClosed && standbys.length < standbyWanted) {
        await records.ensureDir();
        const name = `standby-${randomBytes(6).toString('hex')}`;
        const logFile = path.join(options.stateDir, `${name}.log`);
        const portFile = path.join(options.stateDir, `${name}.port`);
        const token = randomBytes(32).toString('base64url');
        const child = await spawnAgent({
          agentEntry,
          port: 0,
          portFile,
          logFile,
          standbyToken: token,
          chromePath: options.chromePath,
          logLevel: options.agentLogLevel ?? 'info',
          egress: options.egress,
          fsEnv: options.agentFsEnv,
        });
        const standby: Standby = { child, agentUrl: '', logFile, token, ready: Promise.resolve(false) };
        standby.ready = waitForStandby(standby, portFile);
        child.once('exit', () => {
          const index = standbys.indexOf(standby);
          if (index >= 0) standbys.splice(index, 1);
          void rm(logFile, { force: true });
          void rm(portFile, { force: true });
        });
        standbys.push(standby);
        // One at a time, so standbys never compete with each other for the CPU.
        await standby.ready;
        if (standbyClosed) stopStandby(standby);
      }
    })()
      .catch((error: unknown) => log.warn({ err: error }, 'could not start a standby agent; launches start their own'))
      .finally(() => (refilling = undefined));
    return refilling;
  }

  function stopStandby(standby: Standby): void {
    const index = standbys.indexOf(standby);
    if (index >= 0) standbys.splice(index, 1);
    if (standby.child.pid) signalProcessGroup(standby.child.pid, 'SIGTERM');
  }

  /** Resolves true once the standby reported its port and answers as one; false if it exits or takes more than 10 s. */
  async function waitForStandby(standby: Standby, portFile: string): Promise<boolean> {
    const { child } = standby;
    const deadline = Date.now() + 10_000;
    while (child.exitCode === null && child.signalCode === null && Date.now() < deadline) {
      if (!standby.agentUrl) {
        const port = await readReportedPort(portFile);
        if (port !== undefined) {
          standby.agentUrl = `http://127.0.0.1:${port}`;
          await rm(portFile, { force: true });
        }
      }
      if (standby.agentUrl && (await fetchHealth({ url: standby.agentUrl, token: standby.token }, 500))?.status === 'standby') return true;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    return false;
  }

  /**
   * A standby agent, claimed for `spec`, or undefined (then the launch spawns its own).
   * One still loading is waited for: it is further along than a new one would be. The
   * record names the standby before the claim (see start).
   */
  async function claimStandby(spec: BrowserLaunchSpec, record: BrowserRecord): Promise<Standby | undefined> {
    const standby = standbys.shift();
    if (!standby) return undefined;
    if (await standby.ready) {
      await records.write({ ...record, agentPid: standby.child.pid!, agentUrl: standby.agentUrl });
      if (await claimStandbyAgent({ url: standby.agentUrl, token: standby.token }, options.agentTokens(spec.browserId), spec, record.workDir, record.chromiumUid)) return standby;
    }
    log.warn({ agent_pid: standby.child.pid }, 'a standby agent could not be claimed; starting a new one');
    stopStandby(standby);
    return undefined;
  }

  async function start(spec: BrowserLaunchSpec, signal: AbortSignal): Promise<ObservedBrowser> {
    const browserId = spec.browserId;
    await records.ensureDir();
    await mkdir(workRoot, { recursive: true, mode: 0o711 });
    // Browsers may pass through, not list it (isolation.ts also hides it from them).
    if (uids) await chmod(workRoot, 0o711);
    const workDir = path.join(workRoot, workDirName(browserId));
    // A dir left by an agent that died hard (SIGKILL) must not leak into the new browser.
    await rm(workDir, { recursive: true, force: true });
    await reserveRecordedUids();
    const chromiumUid = await uids?.allocate(browserId);
    const record: BrowserRecord = {
      browserId,
      agentPid: 0,
      agentUrl: '',
      agentEntry,
      workDir,
      ...(chromiumUid !== undefined ? { chromiumUid } : {}),
      logFile: records.logFile(browserId),
      labels: spec.labels,
      startedAt: new Date().toISOString(),
    };
    // The record is on disk before any agent serves this browser: a service killed from
    // here on leaves a record, so the next start finds the agent (by its pid, or by the
    // work dir it was started for while its pid is not recorded yet) and ends it with the
    // session. Written after the agent, a kill in between left an agent and its Chromium
    // running for ever with nothing pointing at them.
    // Given back if nothing was started for it; once a record names it, stop() gives it back.
    const standby = await claimStandby(spec, record).catch(async (error: unknown) => {
      if (chromiumUid !== undefined) await uids!.release(chromiumUid, browserId);
      throw error;
    });
    // A new agent chooses its port and reports it (awaitReady reads it); a standby already has.
    record.agentUrl = standby?.agentUrl ?? '';
    const portFile = standby ? undefined : records.portFile(browserId);
    let child: ChildProcess;
    if (standby) {
      child = standby.child;
      // The agent keeps writing to the same file under the browser's name.
      await rename(standby.logFile, record.logFile).catch(() => undefined);
    } else {
      await records.write(record);
      await rm(portFile!, { force: true });
      child = await spawnAgent({
        agentEntry,
        spec,
        agentToken: options.agentTokens(browserId),
        port: 0,
        portFile,
        workDir,
        ...(chromiumUid !== undefined ? { chromiumUid } : {}),
        logFile: record.logFile,
        chromePath: options.chromePath,
        logLevel: options.agentLogLevel ?? 'info',
        egress: options.egress,
        fsEnv: options.agentFsEnv,
      });
    }
    record.agentPid = child.pid!;
    const entry: Tracked = { record, child, starting: true, ...(portFile ? { portFile } : {}) };
    tracked.set(browserId, entry);
    child.once('exit', (code, exitSignal) => {
      entry.exit = { code, signal: exitSignal };
      if (!entry.terminating) log.warn({ browser_id: browserId, code, signal: exitSignal }, 'browser agent exited');
    });
    await records.write(record);
    try {
      return await awaitReady(entry, signal);
    } finally {
      delete entry.starting;
      // After the launch, so the next standby's start does not compete with this Chromium's.
      void refillStandbys();
    }
  }

  async function awaitReady(entry: Tracked, signal: AbortSignal): Promise<ObservedBrowser> {
    const started = Date.now();
    const { record } = entry;
    for (;;) {
      if (signal.aborted) {
        // A moment for the agent to close Chromium itself, which leaves no temp files.
        await stop(entry, 2000);
        throw signal.reason ?? new Error('launch aborted');
      }
      if (entry.exit) return observed(entry, 'Failed', await failureReason(entry));
      if (!record.agentUrl && entry.portFile) {
        const port = await readReportedPort(entry.portFile);
        if (port !== undefined) {
          record.agentUrl = `http://127.0.0.1:${port}`;
          await records.write(record);
          await rm(entry.portFile, { force: true });
          delete entry.portFile;
        }
      }
      const health = record.agentUrl ? await fetchHealth(agentOf(record), 1000) : undefined;
      if (health?.status === 'ready' && health.browser) {
        record.browserPid = health.browser.pid;
        await records.write(record);
        log.info({ browser_id: record.browserId, agent_pid: record.agentPid, ms: Date.now() - started }, 'browser launched');
        return observed(entry, 'Ready');
      }
      if (Date.now() - started > launchTimeoutMs) {
        entry.failure = `agent not ready within ${launchTimeoutMs} ms`;
        await stop(entry, 1000, { forget: false });
        return observed(entry, 'Failed', await failureReason(entry));
      }
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  /** Clean close through the agent, then SIGKILL of both process groups, then the files. */
  async function stop(entry: Tracked, graceMs: number, how: { forget: boolean; discardProfile?: boolean } = { forget: true }): Promise<void> {
    const { record } = entry;
    const agentAlive = () => !entry.exit && isProcessAlive(record.agentPid);
    if (agentAlive() && (await isProcessOf(record.agentPid, record.agentEntry))) {
      // The agent gets most of the grace for Chromium and keeps a little to clean up.
      const asked = await requestAgentShutdown(agentOf(record), Math.floor(graceMs * 0.8), { saveProfile: how.discardProfile !== true });
      if (!asked) signalProcessGroup(record.agentPid, 'SIGTERM');
      const deadline = Date.now() + graceMs;
      while (agentAlive() && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    }
    if (record.agentPid && (await processGroupMembers(record.agentPid)).length > 0) signalProcessGroup(record.agentPid, 'SIGKILL');
    // Chromium has its own group, and its pid is unknown if the agent died before ready;
    // an agent spawned just before a kill of the service has no pid on record yet.
    const browserGroups = [...new Set([...(await processGroupsMentioning(record.workDir)), ...(await agentGroupsStartedFor(record.workDir, record.agentEntry))])];
    for (const pgid of browserGroups) signalProcessGroup(pgid, 'SIGKILL');
    await Promise.all([record.agentPid, ...browserGroups].filter((pid) => pid > 0).map((pid) => waitForProcessGroupExit(pid, 5000)));
    await rm(record.workDir, { recursive: true, force: true, maxRetries: 3, retryDelay: 50 });
    if (how.forget) {
      // Only with the record: a Failed browser kept for its reason still holds its uid.
      if (record.chromiumUid !== undefined) await uids?.release(record.chromiumUid, record.browserId);
      await records.remove(record.browserId);
      tracked.delete(record.browserId);
    }
  }

  async function entryFor(browserId: string): Promise<Tracked | undefined> {
    assertSafeBrowserId(browserId);
    return tracked.get(browserId) ?? (await adopt(browserId));
  }

  /** Reuses a running browser, replaces a dead one, or starts one. */
  async function launchOnce(spec: BrowserLaunchSpec, signal: AbortSignal): Promise<ObservedBrowser> {
    const existing = await entryFor(spec.browserId);
    if (existing?.terminating) await existing.terminating.catch(() => undefined);
    else if (existing) {
      const current = await phaseOf(existing);
      if (current.phase === 'Ready') return current;
      await stop(existing, 0);
    }
    return start(spec, signal);
  }

  if (standbyWanted > 0) void refillStandbys();

  const runtime: LocalRuntime = {
    launch(spec, { signal }) {
      assertSafeBrowserId(spec.browserId);
      // Concurrent launches of one id share the first one.
      const pending = launching.get(spec.browserId);
      if (pending) return pending.done;
      const done = launchOnce(spec, signal).finally(() => launching.delete(spec.browserId));
      launching.set(spec.browserId, { done, labels: spec.labels });
      return done;
    },

    async observe(browserId) {
      const pending = launching.get(browserId);
      if (pending && !tracked.has(browserId)) return { browserId, phase: 'Starting', labels: pending.labels };
      const entry = await entryFor(browserId);
      if (!entry) return undefined;
      const result = await phaseOf(entry);
      // Gone is final: nothing is left to close, only files to remove.
      if (result.phase === 'Gone') await stop(entry, 0);
      return result;
    },

    async list() {
      const ids = new Set([...tracked.keys(), ...launching.keys(), ...(await records.ids())]);
      const results = await Promise.all([...ids].map((id) => runtime.observe(id)));
      return results.filter((result): result is ObservedBrowser => result !== undefined);
    },

    async applySettings(browserId, settings) {
      const entry = await entryFor(browserId);
      const current = entry ? await phaseOf(entry) : undefined;
      if (!entry || current?.phase !== 'Ready') throw new BrowserSettingsError(`browser ${browserId} is not running`);
      const answer = await postAgentSettings(agentOf(entry.record), settings);
      if (!answer.ok) throw new BrowserSettingsError(answer.message);
    },

    async reset(browserId, { startUrl, signal }) {
      const entry = await entryFor(browserId);
      const current = entry ? await phaseOf(entry) : undefined;
      if (!entry || current?.phase !== 'Ready') throw new BrowserResetError(`browser ${browserId} is not running`);
      const started = Date.now();
      const answer = await postAgentReset(agentOf(entry.record), { ...(startUrl !== undefined ? { startUrl } : {}), ...(signal ? { signal } : {}) });
      if (!answer.ok) throw new BrowserResetError(answer.message);
      log.info({ browser_id: browserId, ms: Date.now() - started, ...answer.report }, 'browser reset');
      return answer.report;
    },

    async terminate(browserId, { graceMs, discardProfile }) {
      // A launch in flight finishes first, so what it started is terminated too.
      await launching.get(browserId)?.done.catch(() => undefined);
      const entry = await entryFor(browserId);
      if (!entry) return;
      entry.terminating ??= stop(entry, graceMs, { forget: true, discardProfile: discardProfile === true }).finally(() => delete entry.terminating);
      await entry.terminating;
      log.info({ browser_id: browserId }, 'browser terminated');
    },

    async terminateAll(graceMs) {
      standbyClosed = true;
      for (const standby of [...standbys]) stopStandby(standby);
      const ids = new Set([...tracked.keys(), ...(await records.ids())]);
      await Promise.all([...ids].map((id) => runtime.terminate(id, { graceMs })));
    },

    close() {
      // A standby is only of use to this runtime (and exits by itself when we are gone).
      standbyClosed = true;
      for (const standby of [...standbys]) stopStandby(standby);
      tracked.clear();
      return Promise.resolve();
    },
  };
  return runtime;
}
