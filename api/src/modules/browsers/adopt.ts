import type { AppDeps } from '../../app-deps.js';
import { endSession, TERMINATE_GRACE_MS } from './service.js';
import { sessionVerdict } from './session-verdict.js';
import { listLiveSessions, type SessionRow } from './store.js';

export interface AdoptionReport {
  /** Running sessions whose browser still runs: they carry on. */
  adopted: number;
  /** Sessions ended because their browser is gone or crashed, or their create was cut short. */
  ended: number;
  /** Browsers with no live session, terminated. */
  orphans: number;
}

/**
 * Start-up reconciliation for a single-service runtime (embedded mode, where the pid
 * claim on the data dir guarantees one service): after a crash or kill -9 of the service,
 * its agents still run (each in its own process group). Sessions that were running and
 * whose browser is Ready are adopted as they are (same agent, same cdp_ws_url path; tokens
 * stay valid since the signing key is in Postgres). Everything else is made consistent
 * before the first request: a create that was in flight lost its caller, so its browser is
 * terminated and the row ended as launch_interrupted; a session whose browser died ends
 * as browser_gone (or browser_crashed); a browser with no live session is terminated.
 *
 * Not for several replicas sharing one runtime: a 'starting' row may be another
 * replica's create in progress there.
 */
export async function adoptBrowsersAtStart(deps: AppDeps): Promise<AdoptionReport> {
  const log = deps.log.child({ component: 'browser-adoption' });
  const observed = new Map((await deps.runtime.list()).map((b) => [b.browserId, b]));
  const report: AdoptionReport = { adopted: 0, ended: 0, orphans: 0 };
  const end = async (row: SessionRow, reason: string) => {
    if (await endSession(deps, row, reason)) report.ended += 1;
    log.warn({ sessionId: row.id, reason }, `browser session ended at start-up: ${reason}`);
  };
  const live = await listLiveSessions(deps.db);
  const liveIds = new Set(live.map((row) => row.id));
  const orphans = [...observed.keys()].filter((id) => !liveIds.has(id));
  await inParallel(live, async (row) => {
    // Settled: nothing of the service before the restart is still under way, so no 'wait'.
    const verdict = sessionVerdict(row, { browser: observed.get(row.id), settled: true });
    if (verdict.kind === 'end') await end(row, verdict.reason);
    else if (verdict.kind === 'keep') {
      report.adopted += 1;
      log.info({ sessionId: row.id }, 'browser session re-adopted');
    }
  });
  await inParallel(orphans, async (id) => {
    await deps.runtime.terminate(id, { graceMs: TERMINATE_GRACE_MS });
    report.orphans += 1;
    log.warn({ browserId: id }, 'terminated a browser that has no live session');
  });
  log.info(report, 'browser sessions reconciled at start-up');
  return report;
}

/**
 * Closes run a few at a time: the service listens only once reconciliation is done, and
 * each interrupted launch takes its agent a second or so to close (one after the other, a
 * kill during a burst of creates kept the service down that many seconds); all at once,
 * their /proc scans compete for a small machine's CPU.
 */
const RECONCILE_CONCURRENCY = 4;

async function inParallel<T>(items: T[], work: (item: T) => Promise<void>): Promise<void> {
  const queue = [...items];
  const worker = async () => {
    for (let item = queue.shift(); item !== undefined; item = queue.shift()) await work(item);
  };
  await Promise.all(Array.from({ length: Math.min(RECONCILE_CONCURRENCY, queue.length) }, worker));
}
