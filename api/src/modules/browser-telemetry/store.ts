import type { Queryable } from '../../db/pool.js';
import type { TelemetryEvent } from '../../../../contract/telemetry.js';

/** browser_telemetry_events: SQL only (service.ts holds the rules). */

export interface StoredEvent {
  seq: number;
  event: TelemetryEvent;
}

export interface IngestSession {
  id: string;
  org_id: string;
  project_id: string;
  telemetry: { browser: Record<string, { enabled?: boolean } | undefined> } | null;
  deleted_at: Date | null;
}

/** The session an agent's batch is for, by id alone (the token named it), ended ones included. */
export async function findIngestSession(db: Queryable, id: string): Promise<IngestSession | undefined> {
  const { rows } = await db.query<IngestSession>('SELECT id, org_id, project_id, telemetry, deleted_at FROM browser_sessions WHERE id = $1', [id]);
  return rows[0];
}

/** Inserts in order (seq follows the batch's order); returns how many. */
export async function insertEvents(db: Queryable, session: Pick<IngestSession, 'id' | 'org_id' | 'project_id'>, events: TelemetryEvent[], now: Date): Promise<number> {
  if (events.length === 0) return 0;
  const { rowCount } = await db.query(
    `INSERT INTO browser_telemetry_events (session_id, org_id, project_id, category, type, ts, received_at, event)
     SELECT $1, $2, $3, e->>'category', e->>'type', (e->>'ts')::bigint, $4, e
       FROM jsonb_array_elements($5::jsonb) WITH ORDINALITY AS t(e, n) ORDER BY n`,
    [session.id, session.org_id, session.project_id, now, JSON.stringify(events)],
  );
  return rowCount ?? 0;
}

/** Keeps the newest `max` events of the session; returns how many were removed. */
export async function trimSession(db: Queryable, sessionId: string, max: number): Promise<number> {
  const { rowCount } = await db.query(
    `DELETE FROM browser_telemetry_events
      WHERE session_id = $1
        AND seq <= (SELECT seq FROM browser_telemetry_events WHERE session_id = $1 ORDER BY seq DESC OFFSET $2 LIMIT 1)`,
    [sessionId, max],
  );
  return rowCount ?? 0;
}

/** Removes events that arrived before `cutoff`, in bounded chunks; returns how many. */
export async function sweepBefore(db: Queryable, cutoff: Date, chunk = 5000): Promise<number> {
  let total = 0;
  for (;;) {
    const { rowCount } = await db.query(
      `DELETE FROM browser_telemetry_events WHERE seq IN (SELECT seq FROM browser_telemetry_events WHERE received_at < $1 LIMIT $2)`,
      [cutoff, chunk],
    );
    total += rowCount ?? 0;
    if ((rowCount ?? 0) < chunk) return total;
  }
}

export interface ListFilter {
  sessionId: string;
  categories: string[] | undefined;
  /** Microseconds, inclusive. */
  sinceTs: number | undefined;
  untilTs: number | undefined;
  order: 'asc' | 'desc';
  limit: number;
  offset: number;
}

/** A page of events (limit + 1 rows, so the caller knows whether more follow). */
export async function listEvents(db: Queryable, f: ListFilter): Promise<StoredEvent[]> {
  const { rows } = await db.query<{ seq: string; event: TelemetryEvent }>(
    `SELECT seq, event FROM browser_telemetry_events
      WHERE session_id = $1
        AND ($2::text[] IS NULL OR category = ANY($2))
        AND ($3::bigint IS NULL OR ts >= $3)
        AND ($4::bigint IS NULL OR ts <= $4)
      ORDER BY seq ${f.order === 'desc' ? 'DESC' : 'ASC'}
      LIMIT $5 OFFSET $6`,
    [f.sessionId, f.categories ?? null, f.sinceTs ?? null, f.untilTs ?? null, f.limit + 1, f.offset],
  );
  return rows.map((row) => ({ seq: Number(row.seq), event: row.event }));
}

/** Events after `afterSeq`, oldest first, at most `limit`. */
export async function eventsAfter(db: Queryable, sessionId: string, afterSeq: number, limit: number): Promise<StoredEvent[]> {
  const { rows } = await db.query<{ seq: string; event: TelemetryEvent }>(
    'SELECT seq, event FROM browser_telemetry_events WHERE session_id = $1 AND seq > $2 ORDER BY seq LIMIT $3',
    [sessionId, afterSeq, limit],
  );
  return rows.map((row) => ({ seq: Number(row.seq), event: row.event }));
}

/** The newest seq of the session (0 when none): where a fresh stream starts. */
export async function lastSeq(db: Queryable, sessionId: string): Promise<number> {
  const { rows } = await db.query<{ seq: string | null }>('SELECT max(seq) AS seq FROM browser_telemetry_events WHERE session_id = $1', [sessionId]);
  return Number(rows[0]?.seq ?? 0);
}
