import type { Queryable } from '../../db/pool.js';
import type { TimelineRow } from './rows.js';
import type { ConnectionStatus } from './schema.js';

/** The auth_health_checks table, and the timeline that reads it with the flows. */

export async function insertHealthCheck(
  db: Queryable,
  check: { id: string; connectionId: string; previousStatus: ConnectionStatus; now: Date },
): Promise<void> {
  await db.query(
    `INSERT INTO auth_health_checks (id, connection_id, previous_status, started_at, updated_at) VALUES ($1, $2, $3, $4, $4)`,
    [check.id, check.connectionId, check.previousStatus, check.now],
  );
}

export async function finishHealthCheck(
  db: Queryable,
  id: string,
  result: { status: ConnectionStatus | null; browserSessionId: string | null; errorCode?: string; errorMessage?: string; now: Date },
): Promise<void> {
  await db.query(
    `UPDATE auth_health_checks SET status = $2, browser_session_id = $3, error_code = $4, error_message = $5, updated_at = $6 WHERE id = $1`,
    [id, result.status, result.browserSessionId, result.errorCode ?? null, result.errorMessage ?? null, result.now],
  );
}

export async function listTimeline(
  db: Queryable,
  connectionId: string,
  filter: { limit: number; offset: number; type?: 'login' | 'reauth' | 'health_check' | undefined },
): Promise<TimelineRow[]> {
  const { rows } = await db.query<TimelineRow>(
    `SELECT * FROM (
        SELECT id, lower(type) AS type, status, step, browser_session_id, error_code, error_message, website_error,
               NULL::text AS previous_status, started_at, updated_at, seq
          FROM auth_flows WHERE connection_id = $1
        UNION ALL
        SELECT id, 'health_check', coalesce(status, previous_status), NULL, browser_session_id, error_code, error_message, NULL,
               previous_status, started_at, updated_at, seq
          FROM auth_health_checks WHERE connection_id = $1
      ) t
      WHERE $2::text IS NULL OR t.type = $2
      ORDER BY t.started_at DESC, t.seq DESC
      LIMIT $3 OFFSET $4`,
    [connectionId, filter.type ?? null, filter.limit + 1, filter.offset],
  );
  return rows;
}
