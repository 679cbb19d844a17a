import type { AppDeps } from '../../app-deps.js';
import { finishOnAgent } from './service.js';

/**
 * An embedded service that stops closes its browsers after it stopped listening, when
 * their agents could no longer hand a video over. So the recordings still running are
 * finished first, while the server still takes their uploads, as profile-archive-stop.ts
 * does for profiles. Not in Kubernetes mode: browser pods outlive the API, and so do their
 * recordings.
 */

/** How long the stop waits for all of them together. */
export const FINISH_AT_STOP_MS = 30_000;

export async function finishLiveRecordings(deps: AppDeps): Promise<number> {
  let rows: { id: string; session_id: string; agent_url: string }[];
  try {
    ({ rows } = await deps.db.query<{ id: string; session_id: string; agent_url: string }>(
      `SELECT r.id, r.session_id, s.agent_url FROM replays r JOIN browser_sessions s ON s.id = r.session_id
       WHERE r.status = 'recording' AND s.deleted_at IS NULL AND s.agent_url IS NOT NULL`,
    ));
  } catch (error) {
    deps.log.error({ err: error }, 'cannot list the running recordings; the stop goes on without finishing them');
    return 0;
  }
  await Promise.all(
    rows.map((row) =>
      finishOnAgent(deps, { id: row.session_id, agent_url: row.agent_url }, row.id, FINISH_AT_STOP_MS).catch((error: unknown) => {
        deps.log.error({ err: error, replayId: row.id, sessionId: row.session_id }, 'finishing a recording before the stop failed');
      }),
    ),
  );
  return rows.length;
}
