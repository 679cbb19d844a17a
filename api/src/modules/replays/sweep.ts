import type { AppDeps } from '../../app-deps.js';
import { deleteReplay, listExpired, listOverdueRecordings, markEnded } from './store.js';

/**
 * The retention of recordings: a background pass deletes each video and its row once
 * expires_at passed (BROWSERPLANE_REPLAY_RETENTION_DAYS after its start), and ends as
 * failed the recordings whose agent never reported (it died with its browser) once past
 * their max duration by OVERDUE_GRACE_MS.
 */

export const REPLAY_SWEEP_INTERVAL_MS = 60_000;
/** Beyond its max duration, the time a recording's finishing and upload may take. */
export const OVERDUE_GRACE_MS = 10 * 60_000;
const BATCH = 100;

export async function sweepReplays(deps: Pick<AppDeps, 'db' | 'clock' | 'replayStore' | 'log'>): Promise<{ expired: number; abandoned: number }> {
  const now = deps.clock.now();
  let abandoned = 0;
  for (const row of await listOverdueRecordings(deps.db, now, OVERDUE_GRACE_MS)) {
    if (await markEnded(deps.db, row.id, { status: 'failed', at: now, failure: 'the browser never handed the video over' })) abandoned++;
  }
  let expired = 0;
  for (;;) {
    const batch = await listExpired(deps.db, now, BATCH);
    for (const row of batch) {
      // The file first: a row without a file is a 404, a file without a row would leak.
      await deps.replayStore.delete({ orgId: row.org_id, projectId: row.project_id, replayId: row.id });
      await deleteReplay(deps.db, row.id);
      expired++;
    }
    if (batch.length < BATCH) break;
  }
  if (expired + abandoned > 0) deps.log.info({ expired, abandoned }, 'replays swept');
  return { expired, abandoned };
}

/** Runs the sweep every `intervalMs` until stopped; a failed pass is logged and the next one tries again. */
export function startReplaySweep(deps: Pick<AppDeps, 'db' | 'clock' | 'replayStore' | 'log'>, intervalMs = REPLAY_SWEEP_INTERVAL_MS): { stop(): Promise<void> } {
  let running: Promise<unknown> = Promise.resolve();
  const timer = setInterval(() => {
    running = sweepReplays(deps).catch((error: unknown) => deps.log.error({ err: error }, 'replay sweep failed'));
  }, intervalMs);
  timer.unref();
  return {
    async stop() {
      clearInterval(timer);
      await running;
    },
  };
}
