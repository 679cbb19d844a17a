import type { AppDeps } from '../../app-deps.js';
import type { Db } from '../../db/pool.js';
import { terminateGraceMs } from './service.js';
import { listLiveSessions, type SessionRow } from './store.js';

/**
 * A stopping service closes every browser, and the profile of a session with save_changes
 * would be lost with it: its agent uploads to this service, which stops listening once
 * drained. So those browsers are closed first, while the server still takes their uploads.
 * Their rows stay live and end as browser_gone at the next start, like every other session
 * of a stopped service.
 *
 * Split in two so the stop can look before it announces itself: a stop without writers
 * then refuses new connections at once, exactly as before; only a stop with writers keeps
 * listening, for as long as their uploads take.
 */
export async function liveProfileWriters(deps: { db: Db; log: AppDeps['log'] }): Promise<SessionRow[]> {
  try {
    return (await listLiveSessions(deps.db)).filter((row) => row.profile_save_changes && row.phase === 'running');
  } catch (error) {
    deps.log.error({ err: error }, 'cannot list the sessions that save profiles; the stop goes on without saving them');
    return [];
  }
}

/** Closes them in parallel; a failure is logged and the stop goes on. */
export async function closeProfileWriters(deps: Pick<AppDeps, 'runtime' | 'log'>, writers: SessionRow[]): Promise<void> {
  await Promise.all(
    writers.map((row) =>
      deps.runtime.terminate(row.id, { graceMs: terminateGraceMs(row) }).catch((error: unknown) => {
        deps.log.error({ err: error, sessionId: row.id }, 'closing a browser to save its profile before the stop failed');
      }),
    ),
  );
}
