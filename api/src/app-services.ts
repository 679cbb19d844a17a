import type { AppDeps } from './app-deps.js';
import { AuditRecorder, DEFAULT_AUDIT_QUEUE_MAX } from './modules/audit-logs/recorder.js';
import { auditRetentionSweep, AUDIT_SWEEP_INTERVAL_MS, DEFAULT_AUDIT_RETENTION_DAYS } from './modules/audit-logs/retention.js';
import { AuthFlows } from './modules/auth-connections/engine/flows.js';
import { PoolManager, POOL_RECONCILE_INTERVAL_MS } from './modules/browser-pools/manager.js';
import type { CdpConnections } from './modules/browsers/cdp-proxy.js';
import { IdleReaper, REAP_INTERVAL_MS } from './modules/browsers/reaper.js';
import { MIN_FREE_MEMORY_BYTES } from './modules/browser-pools/fill.js';
import { DEFAULT_SPARE_LEARN_MINUTES, SpareKeeper, SPARE_PASS_INTERVAL_MS } from './modules/browsers/spares.js';
import { startReplaySweep } from './modules/replays/sweep.js';
import { telemetryRetentionSweep, TELEMETRY_SWEEP_INTERVAL_MS } from './modules/browser-telemetry/sweep.js';

/**
 * The app's long-lived services, made once per app by whoever composes it (the service,
 * the test app) and handed to the routes that need them: nobody finds them through a
 * hidden registry, and their owner starts and stops them.
 */
export interface AppServices {
  /** Warm pools: leases, fill, release. Started only where pools are filled (the API process). */
  pools: PoolManager;
  /** Login flows, health checks and re-auths. */
  flows: AuthFlows;
  /** Warm spares for POST /browsers. Kept only where started (the API process); creates look for one whenever spares are configured. */
  spares: SpareKeeper;
  /** The audit log's writer: the route chain hands it every state-changing call; its owner closes it (writing what is queued). */
  auditLog: AuditRecorder;
}

export interface BackgroundOptions {
  /** The idle reaper's tick (default REAP_INTERVAL_MS); false: no reaper. */
  reaper?: { intervalMs?: number } | false;
  /** The pool fill loop's tick (default POOL_RECONCILE_INTERVAL_MS); false: pools are not filled here. */
  pools?: { intervalMs?: number } | false;
  /** The job queue (health checks): false runs login flows on demand only. */
  jobs?: { pollIntervalMs?: number } | false;
  /** The warm spares' planning pass (default SPARE_PASS_INTERVAL_MS); false or absent: no spares are started here. */
  spares?: { intervalMs?: number } | false;
  /** The audit log's retention sweep (default AUDIT_SWEEP_INTERVAL_MS, hourly); false or absent: not swept here. */
  auditRetention?: { intervalMs?: number } | false;
  /** Browser telemetry's retention sweep (default TELEMETRY_SWEEP_INTERVAL_MS); false or absent: not swept here. Stopped with the reaper. */
  telemetryRetention?: { intervalMs?: number } | false;
}

export function createAppServices(deps: AppDeps): AppServices {
  const spares = new SpareKeeper(deps, {
    max: deps.settings.spares?.max ?? 0,
    learnMinutes: deps.settings.spares?.learnMinutes ?? DEFAULT_SPARE_LEARN_MINUTES,
    minFreeMemoryBytes: deps.settings.poolMinFreeMemoryBytes ?? MIN_FREE_MEMORY_BYTES,
  });
  const auditLog = new AuditRecorder(deps.db, deps.log, { queueMax: deps.settings.auditLog?.queueMax ?? DEFAULT_AUDIT_QUEUE_MAX });
  return { pools: new PoolManager(deps), flows: new AuthFlows(deps), spares, auditLog };
}

/** Running background work of one app, started together and stopped in the service's order. */
export interface RunningBackground {
  /** Starts stopping the pools and flows at once (waiting acquires are answered now); resolves when both have stopped. */
  stopPoolsAndFlows(): Promise<void>;
  stopReaper(): Promise<void>;
  /** Stops the audit retention sweep (the recorder itself is closed by the services' owner). */
  stopAuditSweep(): Promise<void>;
}

/**
 * Starts the background work the options ask for: the idle reaper (which spares
 * sessions with live CDP `connections`), the pool fill and the login-flow engine.
 */
export async function startBackground(deps: AppDeps, services: AppServices, connections: CdpConnections, options: BackgroundOptions): Promise<RunningBackground> {
  const reaper = options.reaper === false ? undefined : new IdleReaper(deps, { connections, intervalMs: options.reaper?.intervalMs ?? REAP_INTERVAL_MS });
  reaper?.start();
  // Recordings' retention runs where the reaper does (the API process).
  const replaySweep = reaper ? startReplaySweep(deps) : undefined;
  const pools = options.pools === false ? undefined : services.pools;
  await pools?.start({ intervalMs: (options.pools || undefined)?.intervalMs ?? POOL_RECONCILE_INTERVAL_MS });
  const spares = options.spares ? services.spares : undefined;
  spares?.start({ intervalMs: (options.spares || undefined)?.intervalMs ?? SPARE_PASS_INTERVAL_MS });
  const auditSweep = options.auditRetention
    ? auditRetentionSweep(deps, {
        retentionDays: deps.settings.auditLog?.retentionDays ?? DEFAULT_AUDIT_RETENTION_DAYS,
        intervalMs: options.auditRetention.intervalMs ?? AUDIT_SWEEP_INTERVAL_MS,
      })
    : undefined;
  auditSweep?.start();
  const telemetrySweep = options.telemetryRetention ? telemetryRetentionSweep(deps, { intervalMs: options.telemetryRetention.intervalMs ?? TELEMETRY_SWEEP_INTERVAL_MS }) : undefined;
  telemetrySweep?.start();
  await services.flows.start({
    jobs: options.jobs !== false && options.jobs !== undefined,
    ...(options.jobs && options.jobs.pollIntervalMs ? { jobPollIntervalMs: options.jobs.pollIntervalMs } : {}),
  });
  return {
    async stopPoolsAndFlows() {
      await Promise.all([pools?.stop(), services.flows.stop(), spares?.stop()]);
    },
    async stopReaper() {
      await Promise.all([reaper?.stop(), replaySweep?.stop(), telemetrySweep?.stop()]);
    },
    async stopAuditSweep() {
      await auditSweep?.stop();
    },
  };
}
