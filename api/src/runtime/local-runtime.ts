import type { ChildProcess } from 'node:child_process';
import { chmod, mkdir, rename, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Logger } from 'pino';
import { packageRoot } from '../paths.js';
import {
  BrowserResetError,
  BrowserSettingsError,
  type BrowserLaunchSpec,
  type LaunchOptions,
  type BrowserResetReport,
  type BrowserRuntime,
  type LiveBrowserSettings,
  type ObservedBrowser,
} from '../../../contract/browser-runtime.js';
import { agentFetch, postAgentReset, postAgentSettings, type AgentEndpoint } from '../../../contract/agent-client.js';
import { readAgentHealth, type AgentHealth } from '../../../contract/agent-wire.js';
import { readReportedPort, spawnAgent } from './agent-process.js';
import { assertSafeBrowserId, BrowserRecords, type BrowserRecord } from './browser-records.js';
import { endBrowserProcesses, failureReason, observedOf, phaseOf, recoverRecorded, workDirName, type Tracked } from './local-browser.js';
import { StandbyAgents, type AgentSpawnSettings } from './standby-agents.js';
import { DEFAULT_SESSION_UIDS, UidPool } from './uid-pool.js';
import type { LocalRuntimeOptions } from './local-runtime-options.js';
import { joinCgroup, MemoryCgroups } from './memory-cgroup.js';

export type { LocalRuntimeOptions } from './local-runtime-options.js';

/**
 * The BrowserRuntime for embedded mode: one agent child process per browser, each in its
 * own process group, recorded in the state dir so a restarted service re-adopts agents
 * that still run. Agents outlive the service on purpose; stopping the service cleanly
 * means calling terminateAll.
 *
 * Beside it: standby-agents.ts (agents started ahead of launches) and local-browser.ts (one
 * tracked browser: its phase, recovering it after a restart, ending its processes).
 */

/** How long one GET /health waits for a starting browser (agent/src/server.ts caps it at 5 s). */
const HEALTH_WAIT_MS = 1000;
/** How long after a launch the runtime's own work for the next launch waits (see start). */
const AFTER_LAUNCH_DELAY_MS = 500;

export class LocalRuntime implements BrowserRuntime {
  private readonly log: Logger;
  private readonly records: BrowserRecords;
  private readonly spawnSettings: AgentSpawnSettings;
  private readonly workRoot: string;
  private readonly launchTimeoutMs: number;
  private readonly tracked = new Map<string, Tracked>();
  private readonly standbys: StandbyAgents;
  /** Launches in flight, by id, with the spec's labels for observe() before a record exists. */
  private readonly launching = new Map<string, { done: Promise<ObservedBrowser>; labels: Record<string, string> }>();
  /** Undefined when not root: agents cannot switch uid, so every browser runs as the service's user. */
  private readonly uids: UidPool | undefined;
  /** The uids named by records on disk, held before the first allocation (after a restart). */
  private recordedUids: Promise<void> | undefined;
  /** Each browser's memory cgroup, where this host lets the service make them. */
  private readonly cgroups: Promise<MemoryCgroups | undefined>;

  constructor(private readonly options: LocalRuntimeOptions) {
    this.log = options.log.child({ component: 'local-runtime' });
    this.records = new BrowserRecords(options.stateDir);
    this.spawnSettings = {
      agentEntry: options.agentEntry ?? path.join(packageRoot(), 'dist/agent/src/main.js'),
      chromePath: options.chromePath,
      logLevel: options.agentLogLevel ?? 'info',
      egress: options.egress,
      fsEnv: options.agentFsEnv,
    };
    this.workRoot = options.workRoot ?? path.join(os.tmpdir(), 'browserplane-browsers');
    this.launchTimeoutMs = options.launchTimeoutMs ?? 30_000;
    const wanted = Math.max(0, options.standbyAgents ?? 1);
    this.standbys = new StandbyAgents({ stateDir: options.stateDir, records: this.records, wanted, spawn: this.spawnSettings, log: this.log });
    this.uids = process.getuid?.() === 0 ? new UidPool(options.sessionUids ?? DEFAULT_SESSION_UIDS, this.log) : undefined;
    if (!this.uids) this.log.warn('not running as root: every browser runs as this service\'s user, in no namespace of its own, so sessions are not isolated from each other on this host');
    if (wanted > 0) void this.standbys.refill();
    this.uids?.prepare();
    this.cgroups = MemoryCgroups.open(options.memoryLimitMb ?? 2048, this.log);
  }

  launch(spec: BrowserLaunchSpec, { signal, onStarted }: LaunchOptions): Promise<ObservedBrowser> {
    assertSafeBrowserId(spec.browserId);
    // Concurrent launches of one id share the first one.
    const pending = this.launching.get(spec.browserId);
    if (pending) return pending.done;
    const done = this.launchOnce(spec, signal, onStarted).finally(() => this.launching.delete(spec.browserId));
    this.launching.set(spec.browserId, { done, labels: spec.labels });
    return done;
  }

  async observe(browserId: string): Promise<ObservedBrowser | undefined> {
    const pending = this.launching.get(browserId);
    if (pending && !this.tracked.has(browserId)) return { browserId, phase: 'Starting', labels: pending.labels };
    const entry = await this.entryFor(browserId);
    if (!entry) return undefined;
    const result = await phaseOf(entry);
    // Gone is final: nothing is left to close, only files to remove.
    if (result.phase === 'Gone') await this.stop(entry, 0);
    return result;
  }

  async list(): Promise<ObservedBrowser[]> {
    const ids = new Set([...this.tracked.keys(), ...this.launching.keys(), ...(await this.records.ids())]);
    const results = await Promise.all([...ids].map((id) => this.observe(id)));
    return results.filter((result): result is ObservedBrowser => result !== undefined);
  }

  async applySettings(browserId: string, settings: LiveBrowserSettings): Promise<void> {
    // A create is answered at Chromium's spawn: a change asked for meanwhile waits for the launch.
    await this.launching.get(browserId)?.done.catch(() => undefined);
    const entry = await this.entryFor(browserId);
    const current = entry ? await phaseOf(entry) : undefined;
    if (!entry || current?.phase !== 'Ready') throw new BrowserSettingsError(`browser ${browserId} is not running`);
    const answer = await postAgentSettings(this.agentOf(entry.record), settings);
    if (!answer.ok) throw new BrowserSettingsError(answer.message);
  }

  async reset(browserId: string, { startUrl, signal }: { startUrl?: string; signal?: AbortSignal }): Promise<BrowserResetReport> {
    await this.launching.get(browserId)?.done.catch(() => undefined);
    const entry = await this.entryFor(browserId);
    const current = entry ? await phaseOf(entry) : undefined;
    if (!entry || current?.phase !== 'Ready') throw new BrowserResetError(`browser ${browserId} is not running`);
    const started = Date.now();
    const answer = await postAgentReset(this.agentOf(entry.record), { ...(startUrl !== undefined ? { startUrl } : {}), ...(signal ? { signal } : {}) });
    if (!answer.ok) throw new BrowserResetError(answer.message);
    this.log.info({ browser_id: browserId, ms: Date.now() - started, ...answer.report }, 'browser reset');
    return answer.report;
  }

  async terminate(browserId: string, { graceMs, discardProfile }: { graceMs: number; discardProfile?: boolean }): Promise<void> {
    // A launch in flight finishes first, so what it started is terminated too.
    await this.launching.get(browserId)?.done.catch(() => undefined);
    const entry = await this.entryFor(browserId);
    if (!entry) return;
    entry.terminating ??= this.stop(entry, graceMs, { forget: true, discardProfile: discardProfile === true }).finally(() => delete entry.terminating);
    await entry.terminating;
    this.log.info({ browser_id: browserId }, 'browser terminated');
  }

  /** Terminates every browser this runtime knows, for a clean service stop. */
  async terminateAll(graceMs: number): Promise<void> {
    this.standbys.close();
    const ids = new Set([...this.tracked.keys(), ...(await this.records.ids())]);
    await Promise.all([...ids].map((id) => this.terminate(id, { graceMs })));
  }

  /** Forgets the agents without stopping them (they are re-adopted at the next start). */
  close(): Promise<void> {
    // A standby is only of use to this runtime (and exits by itself when we are gone).
    this.standbys.close();
    this.tracked.clear();
    return Promise.resolve();
  }

  private agentOf(record: BrowserRecord): AgentEndpoint {
    return { url: record.agentUrl, token: this.options.agentTokens(record.browserId) };
  }

  private reserveRecordedUids(): Promise<void> {
    return (this.recordedUids ??= (async () => {
      for (const id of await this.records.ids()) {
        const record = await this.records.read(id).catch(() => undefined);
        if (record?.chromiumUid !== undefined) this.uids?.reserve(record.chromiumUid, id);
      }
    })().catch((error: unknown) => {
      this.recordedUids = undefined;
      throw error;
    }));
  }

  private async entryFor(browserId: string): Promise<Tracked | undefined> {
    assertSafeBrowserId(browserId);
    const known = this.tracked.get(browserId);
    if (known) return known;
    // A record on disk with no entry in memory: a previous service's browser.
    const record = await this.records.read(browserId);
    if (!record) return undefined;
    const entry = await recoverRecorded(record, this.agentOf(record), this.log);
    this.tracked.set(browserId, entry);
    return entry;
  }

  /** Reuses a running browser, replaces a dead one, or starts one. */
  private async launchOnce(spec: BrowserLaunchSpec, signal: AbortSignal, onStarted: LaunchOptions['onStarted']): Promise<ObservedBrowser> {
    const existing = await this.entryFor(spec.browserId);
    if (existing?.terminating) await existing.terminating.catch(() => undefined);
    else if (existing) {
      const current = await phaseOf(existing);
      if (current.phase === 'Ready') return current;
      await this.stop(existing, 0);
    }
    return this.start(spec, signal, onStarted);
  }

  private async start(spec: BrowserLaunchSpec, signal: AbortSignal, onStarted: LaunchOptions['onStarted']): Promise<ObservedBrowser> {
    const { records, uids, workRoot } = this;
    const browserId = spec.browserId;
    const started = Date.now();
    const workDir = path.join(workRoot, workDirName(browserId));
    // Side by side, as none needs another: all of it is on the create's path.
    const [allocation, ...steps] = await Promise.allSettled([
      this.reserveRecordedUids().then(() => uids?.allocate(browserId)),
      records.ensureDir(),
      (async () => {
        await mkdir(workRoot, { recursive: true, mode: 0o711 });
        // Browsers may pass through, not list it (isolation.ts also hides it from them).
        if (uids) await chmod(workRoot, 0o711);
        // A dir left by an agent that died hard (SIGKILL) must not leak into the new browser.
        await rm(workDir, { recursive: true, force: true });
      })(),
      this.cgroups.then((cgroups) => cgroups?.prepare(browserId)),
    ]);
    const failed = steps.find((step) => step.status === 'rejected');
    if (failed) {
      // A uid taken while another step failed is given back: nothing was started for it.
      if (allocation.status === 'fulfilled' && allocation.value !== undefined) await uids!.release(allocation.value, browserId);
      throw failed.reason;
    }
    if (allocation.status === 'rejected') throw allocation.reason;
    const chromiumUid = allocation.value;
    const cgroup = (steps[2] as PromiseFulfilledResult<string | undefined>).value;
    const prepared = Date.now();
    const record: BrowserRecord = {
      browserId,
      agentPid: 0,
      agentUrl: '',
      agentEntry: this.spawnSettings.agentEntry,
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
    const standby = await this.standbys.claim(spec, record, this.options.agentTokens(browserId), cgroup).catch(async (error: unknown) => {
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
        ...this.spawnSettings,
        spec,
        agentToken: this.options.agentTokens(browserId),
        port: 0,
        portFile,
        workDir,
        ...(chromiumUid !== undefined ? { chromiumUid } : {}),
        logFile: record.logFile,
      });
      // Before the agent has loaded its modules, let alone started Chromium: all it starts inherits the cgroup.
      if (cgroup) await joinCgroup(cgroup, child.pid!);
    }
    record.agentPid = child.pid!;
    const entry: Tracked = { record, child, starting: true, ...(portFile ? { portFile } : {}) };
    this.tracked.set(browserId, entry);
    child.once('exit', (code, exitSignal) => {
      entry.exit = { code, signal: exitSignal };
      if (!entry.terminating) this.log.warn({ browser_id: browserId, code, signal: exitSignal }, 'browser agent exited');
    });
    await records.write(record);
    const claimed = Date.now();
    try {
      const observed = await this.awaitReady(entry, signal, onStarted);
      // Where the runtime's part of a create went (the agent logs its own split).
      this.log.info({ browser_id: browserId, prepare_ms: prepared - started, claim_ms: claimed - prepared, ready_ms: Date.now() - claimed, standby: standby !== undefined }, 'browser launch timings');
      return observed;
    } finally {
      delete entry.starting;
      // After the launch and a moment more, so the next standby's start (150-200 ms of
      // CPU) and the next allocation's process scan compete neither with this Chromium's
      // start nor with its caller's first CDP command.
      setTimeout(() => {
        void this.standbys.refill();
        this.uids?.prepare();
      }, AFTER_LAUNCH_DELAY_MS).unref();
    }
  }

  private async awaitReady(entry: Tracked, signal: AbortSignal, onStarted: LaunchOptions['onStarted']): Promise<ObservedBrowser> {
    const started = Date.now();
    const { record } = entry;
    // Asked first until Chromium is spawned (then onStarted), then until it is ready.
    let reportStart = onStarted;
    for (;;) {
      if (signal.aborted) {
        // A moment for the agent to close Chromium itself, which leaves no temp files.
        await this.stop(entry, 2000);
        throw signal.reason ?? new Error('launch aborted');
      }
      if (entry.exit) return observedOf(entry, 'Failed', await failureReason(entry));
      if (!record.agentUrl && entry.portFile) {
        const port = await readReportedPort(entry.portFile);
        if (port !== undefined) {
          record.agentUrl = `http://127.0.0.1:${port}`;
          await this.records.write(record);
          await rm(entry.portFile, { force: true });
          delete entry.portFile;
        }
      }
      const polled = Date.now();
      const health = record.agentUrl ? await this.waitForHealth(record, signal, this.launchTimeoutMs - (polled - started), reportStart ? 'spawned' : undefined) : undefined;
      if (reportStart && (health?.status === 'ready' || (health?.status === 'starting' && health.spawned))) {
        reportStart({ agentUrl: record.agentUrl });
        reportStart = undefined;
        if (health.status === 'starting') continue;
      }
      if (health?.status === 'ready' && health.browser) {
        record.browserPid = health.browser.pid;
        await this.records.write(record);
        this.log.info({ browser_id: record.browserId, agent_pid: record.agentPid, ms: Date.now() - started }, 'browser launched');
        return observedOf(entry, 'Ready');
      }
      if (Date.now() - started > this.launchTimeoutMs) {
        entry.failure = `agent not ready within ${this.launchTimeoutMs} ms`;
        await this.stop(entry, 1000, { forget: false });
        return observedOf(entry, 'Failed', await failureReason(entry));
      }
      // An answer that did not wait (a standby still handing over, an older agent, no agent
      // listening yet) is asked again after a moment.
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, 20 - (Date.now() - polled))));
    }
  }

  /**
   * GET /health, held by the agent until its browser is ready or `remainingMs` (at most
   * 1 s a request) has passed, so the launch returns the moment Chromium answers rather
   * than at the next poll; an agent that does not wait answers at once. Aborted with the launch.
   */
  private async waitForHealth(record: BrowserRecord, signal: AbortSignal, remainingMs: number, until?: 'spawned'): Promise<AgentHealth | undefined> {
    const waitMs = Math.max(0, Math.min(HEALTH_WAIT_MS, remainingMs));
    try {
      const response = await agentFetch(this.agentOf(record), `/health?wait_ms=${waitMs}${until ? `&until=${until}` : ''}`, { signal: AbortSignal.any([signal, AbortSignal.timeout(waitMs + 1000)]) });
      return readAgentHealth(await response.json());
    } catch {
      return undefined;
    }
  }

  /** Ends the browser's processes and removes its work dir; with `forget`, its record and uid go too. */
  private async stop(entry: Tracked, graceMs: number, how: { forget: boolean; discardProfile?: boolean } = { forget: true }): Promise<void> {
    const { record } = entry;
    await endBrowserProcesses(entry, this.agentOf(record), graceMs, how.discardProfile !== true);
    await (await this.cgroups)?.remove(record.browserId);
    if (how.forget) {
      // Only with the record: a Failed browser kept for its reason still holds its uid.
      if (record.chromiumUid !== undefined) await this.uids?.release(record.chromiumUid, record.browserId);
      await this.records.remove(record.browserId);
      this.tracked.delete(record.browserId);
    }
  }
}

/** The embedded runtime; callers keep this factory (service.ts, the test app). */
export function createLocalRuntime(options: LocalRuntimeOptions): LocalRuntime {
  return new LocalRuntime(options);
}
