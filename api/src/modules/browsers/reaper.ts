import type { AppDeps } from '../../app-deps.js';
import { agentEndpoint, fetchHealth, type AgentEndpoint } from '../../../../contract/agent-client.js';
import { idleSinceOf } from '../../../../contract/agent-wire.js';
import type { CdpConnections } from './cdp-proxy.js';
import { DELETE_REASONS, endSession, TERMINATE_GRACE_MS } from './service.js';
import { sessionVerdict } from './session-verdict.js';
import { endedSessionIds, listLiveSessions, listSessionsOfFinishedInvocations, type SessionRow } from './store.js';

export const REAP_INTERVAL_MS = 5_000;
const HEALTH_TIMEOUT_MS = 2_000;
/** Beyond the launch timeout, how long a 'starting' row waits before it counts as abandoned. */
export const ABANDONED_LAUNCH_GRACE_MS = 10_000;
/** How often the runtime's browsers are compared with the live sessions (see sweepOrphans). */
export const ORPHAN_SWEEP_INTERVAL_MS = 60_000;

/** What the agent's GET /health reports about CDP clients. */
export interface AgentActivity {
  connections: number;
  idleSince: Date | null;
}

export type AgentHealth = (agent: AgentEndpoint) => Promise<AgentActivity | undefined>;

/** GET <agent>/health; undefined when the agent does not answer. */
export const fetchAgentHealth: AgentHealth = async (agent) => {
  const health = await fetchHealth(agent, HEALTH_TIMEOUT_MS);
  return health && { connections: health.connections, idleSince: idleSinceOf(health) };
};

/**
 * Ends sessions nobody uses, every ~5 s (CONTRACT: "inactivity is checked about every 5 s"):
 * - idle: no CDP client for timeout_seconds, counting the agent's clients and the ones
 *   this service proxies; idle since the latest of start, lease, a client seen, a client
 *   closed (a pool's browser waiting for a lease is never idle-timed; its pool refills
 *   whatever ends);
 * - owned by an invocation that finished (the safety net behind the PATCH hook);
 * - the browser is gone (the runtime no longer has it: browser_gone) or crashed (the
 *   runtime reports it Failed, with the reason in the log: browser_crashed);
 * - still 'starting' long after any launch could have ended (launch_interrupted);
 * and, about once a minute, terminates browsers that no live session owns (an end whose
 * terminate failed leaves one behind: see sweepOrphans).
 * Level-triggered: each tick reads every live session afresh, so a restart loses nothing
 * but the in-memory "last seen busy" times (sessions then count as idle from the restart).
 */
export class IdleReaper {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private readonly lastBusy = new Map<string, Date>();
  private readonly intervalMs: number;
  private readonly health: AgentHealth;
  private readonly orphanSweepMs: number;
  private lastSweepAt = Number.NEGATIVE_INFINITY;
  /** Browsers the last sweep found without a live session: ended at the next one if still so. */
  private suspects = new Set<string>();

  constructor(
    private readonly deps: AppDeps,
    private readonly options: { connections?: CdpConnections; intervalMs?: number; health?: AgentHealth; orphanSweepMs?: number } = {},
  ) {
    this.intervalMs = options.intervalMs ?? REAP_INTERVAL_MS;
    this.health = options.health ?? fetchAgentHealth;
    this.orphanSweepMs = options.orphanSweepMs ?? ORPHAN_SWEEP_INTERVAL_MS;
  }

  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => {
      if (!this.running) this.running = this.tick().finally(() => (this.running = undefined));
    }, this.intervalMs);
    this.timer.unref();
  }

  /** Stops the interval and waits for a tick in progress. */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    await this.running;
  }

  /** One pass; tests call it directly with an injected clock. Errors are logged per session. */
  async tick(): Promise<void> {
    try {
      // Listed before the rows are read: a session's row is written before its launch, so
      // every browser listed here has a row in the read below unless that row has ended.
      const browsers = await this.browsersToSweep();
      for (const row of await listSessionsOfFinishedInvocations(this.deps.db)) await this.end(row, DELETE_REASONS.invocation);
      const live = await listLiveSessions(this.deps.db);
      for (const row of live) {
        await this.check(row).catch((error: unknown) =>
          this.deps.log.error({ err: error, sessionId: row.id }, 'checking a browser session failed; the next pass retries'),
        );
      }
      const ids = new Set(live.map((r) => r.id));
      for (const id of this.lastBusy.keys()) if (!ids.has(id)) this.lastBusy.delete(id);
      this.options.connections?.retainOnly(ids);
      if (browsers) await this.sweepOrphans(browsers, ids);
    } catch (error) {
      this.deps.log.error({ err: error }, 'the browser reaper failed');
    }
  }

  private async check(row: SessionRow): Promise<void> {
    const now = this.deps.clock.now();
    if (row.phase === 'starting') return this.endIfAbandoned(row, now);
    if (row.phase !== 'running' || !row.agent_url || !row.started_at) return;
    const agent = await this.health(agentEndpoint(this.deps.agentTokens, row.id, row.agent_url));
    if (!agent) {
      // Not settled: a browser the runtime still moves (Pending, Starting) gets another pass.
      const verdict = sessionVerdict(row, { browser: await this.deps.runtime.observe(row.id), settled: false });
      if (verdict.kind !== 'end') return;
      if (verdict.reason === DELETE_REASONS.crashed) {
        this.deps.log.error({ sessionId: row.id, reason: verdict.crash }, `browser crashed: ${verdict.crash ?? 'no reason reported'}`);
      }
      await this.end(row, verdict.reason);
      return;
    }
    // A browser waiting in its pool, or a spare waiting for a create, is idle by design;
    // only a lease or a session can time out.
    if ((row.pool_id !== null && row.leased_at === null) || row.spare_key !== null) return;
    if (agent.connections > 0 || (this.options.connections?.count(row.id) ?? 0) > 0) {
      this.lastBusy.set(row.id, now);
      return;
    }
    // A lease starts its idle clock afresh: activity before it belonged to someone else.
    const marks = [row.started_at, row.leased_at ?? undefined, this.lastBusy.get(row.id), this.options.connections?.lastClosedAt(row.id)];
    // The agent's clock is the host's; trust its idle_since only when it is not ahead of ours.
    if (agent.idleSince && agent.idleSince <= now) marks.push(agent.idleSince);
    const idleSince = Math.max(...marks.filter((d): d is Date => d !== undefined).map((d) => d.getTime()));
    if (now.getTime() - idleSince >= row.timeout_seconds * 1000) await this.end(row, DELETE_REASONS.idle);
  }

  /**
   * A launch is bounded by the launch timeout, after which its create records the browser
   * running or the row ended. A row still 'starting' well past that lost its create: the
   * database was unreachable when the launch finished (so neither could be written; the
   * caller got a 503), or the process running the create died. Its browser may be up and
   * it holds a slot (a pool counts it toward its size): end it, browser and all.
   */
  private async endIfAbandoned(row: SessionRow, now: Date): Promise<void> {
    const settled = now.getTime() - row.created_at.getTime() >= this.deps.settings.browserLaunchTimeoutMs + ABANDONED_LAUNCH_GRACE_MS;
    // A 'starting' row's browser does not matter to the verdict: it is not observed.
    const verdict = sessionVerdict(row, { browser: undefined, settled });
    if (verdict.kind !== 'end') return;
    this.deps.log.warn({ sessionId: row.id, createdAt: row.created_at }, 'ending a browser session whose launch was never recorded');
    await this.end(row, verdict.reason);
  }

  private async browsersToSweep(): Promise<string[] | undefined> {
    const now = this.deps.clock.now().getTime();
    if (now - this.lastSweepAt < this.orphanSweepMs) return undefined;
    this.lastSweepAt = now;
    try {
      return (await this.deps.runtime.list()).filter((browser) => browser.phase !== 'Gone').map((browser) => browser.browserId);
    } catch (error) {
      // The rest of the pass does not depend on the listing: it goes on without a sweep.
      this.deps.log.warn({ err: error }, 'listing the runtime’s browsers failed; no orphan sweep this pass');
      return undefined;
    }
  }

  /**
   * Ends browsers whose session has ended. Ending a session marks its row first and
   * terminates its browser after; a terminate that fails (the agent or the API server
   * unreachable at that moment) leaves a browser running for nobody. In embedded mode the
   * next start's adoption would catch it, but in Kubernetes mode no replica adopts, so the
   * reaper does it. A browser is ended only when two sweeps a minute apart both found it
   * so: a terminate already under way gets that long to finish on its own. A browser with
   * no row at all is left alone: every launch here writes its row first, so it is not this
   * installation's (another release sharing the namespace).
   */
  private async sweepOrphans(browsers: string[], live: Set<string>): Promise<void> {
    const orphans = [...(await endedSessionIds(this.deps.db, browsers.filter((id) => !live.has(id))))];
    const next = new Set<string>();
    for (const id of orphans) {
      if (!this.suspects.has(id)) {
        next.add(id);
        continue;
      }
      try {
        await this.deps.runtime.terminate(id, { graceMs: TERMINATE_GRACE_MS });
        this.deps.log.warn({ browserId: id }, 'terminated a browser whose session has ended');
      } catch (error) {
        next.add(id);
        this.deps.log.error({ err: error, browserId: id }, 'terminating a browser whose session has ended failed; the next sweep retries');
      }
    }
    this.suspects = next;
  }

  private async end(row: SessionRow, reason: string): Promise<void> {
    try {
      await endSession(this.deps, row, reason);
      this.lastBusy.delete(row.id);
      this.options.connections?.forget(row.id);
    } catch (error) {
      this.deps.log.error({ err: error, sessionId: row.id, reason }, 'ending a browser session failed; the next pass retries');
    }
  }
}
