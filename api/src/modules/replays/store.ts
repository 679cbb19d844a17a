import type { Queryable } from '../../db/pool.js';

/** SQL of the replays table (migration 1795400040000_replays.sql). */

export interface ReplayRow {
  id: string;
  session_id: string;
  org_id: string;
  project_id: string;
  status: 'recording' | 'finished' | 'failed';
  framerate: number;
  max_duration_s: number;
  started_at: Date;
  finished_at: Date | null;
  size_bytes: string | null;
  failure: string | null;
  expires_at: Date;
}

const COLUMNS = 'id, session_id, org_id, project_id, status, framerate, max_duration_s, started_at, finished_at, size_bytes, failure, expires_at';

export interface SessionScope {
  orgId: string;
  projectId: string;
  sessionId: string;
}

export async function insertReplay(db: Queryable, row: Omit<ReplayRow, 'status' | 'finished_at' | 'size_bytes' | 'failure'>): Promise<void> {
  await db.query(
    `INSERT INTO replays (id, session_id, org_id, project_id, status, framerate, max_duration_s, started_at, expires_at)
     VALUES ($1, $2, $3, $4, 'recording', $5, $6, $7, $8)`,
    [row.id, row.session_id, row.org_id, row.project_id, row.framerate, row.max_duration_s, row.started_at, row.expires_at],
  );
}

export async function listSessionReplays(db: Queryable, scope: SessionScope): Promise<ReplayRow[]> {
  const { rows } = await db.query<ReplayRow>(
    `SELECT ${COLUMNS} FROM replays WHERE org_id = $1 AND project_id = $2 AND session_id = $3 ORDER BY started_at, seq`,
    [scope.orgId, scope.projectId, scope.sessionId],
  );
  return rows;
}

export async function findSessionReplay(db: Queryable, scope: SessionScope, replayId: string): Promise<ReplayRow | undefined> {
  const { rows } = await db.query<ReplayRow>(`SELECT ${COLUMNS} FROM replays WHERE org_id = $1 AND project_id = $2 AND session_id = $3 AND id = $4`, [
    scope.orgId,
    scope.projectId,
    scope.sessionId,
    replayId,
  ]);
  return rows[0];
}

/** A replay by its id alone, for routes whose token names it (the view page). */
export async function findReplayById(db: Queryable, replayId: string): Promise<ReplayRow | undefined> {
  const { rows } = await db.query<ReplayRow>(`SELECT ${COLUMNS} FROM replays WHERE id = $1`, [replayId]);
  return rows[0];
}

export async function findRecordingReplay(db: Queryable, replayId: string): Promise<ReplayRow | undefined> {
  const { rows } = await db.query<ReplayRow>(`SELECT ${COLUMNS} FROM replays WHERE id = $1 AND status = 'recording'`, [replayId]);
  return rows[0];
}

export async function countRecording(db: Queryable, sessionId: string): Promise<number> {
  const { rows } = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM replays WHERE session_id = $1 AND status = 'recording'`, [sessionId]);
  return rows[0]!.n;
}

/** Ends a recording; false when it had already ended (or is gone). */
export async function markEnded(
  db: Queryable,
  id: string,
  end: { status: 'finished' | 'failed'; at: Date; sizeBytes?: number; failure?: string },
): Promise<boolean> {
  const { rowCount } = await db.query(
    `UPDATE replays SET status = $2, finished_at = $3, size_bytes = $4, failure = $5 WHERE id = $1 AND status = 'recording'`,
    [id, end.status, end.at, end.sizeBytes ?? null, end.failure ?? null],
  );
  return rowCount === 1;
}

/** Recordings past their max duration by more than `graceMs`: their agent never reported (it died). */
export async function listOverdueRecordings(db: Queryable, now: Date, graceMs: number): Promise<ReplayRow[]> {
  const { rows } = await db.query<ReplayRow>(
    `SELECT ${COLUMNS} FROM replays WHERE status = 'recording' AND started_at + make_interval(secs => max_duration_s) + $2 * interval '1 millisecond' < $1`,
    [now, graceMs],
  );
  return rows;
}

export async function listExpired(db: Queryable, now: Date, limit: number): Promise<ReplayRow[]> {
  const { rows } = await db.query<ReplayRow>(`SELECT ${COLUMNS} FROM replays WHERE expires_at <= $1 AND status <> 'recording' ORDER BY expires_at LIMIT $2`, [now, limit]);
  return rows;
}

export async function deleteReplay(db: Queryable, id: string): Promise<void> {
  await db.query('DELETE FROM replays WHERE id = $1', [id]);
}
