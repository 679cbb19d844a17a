import type { Queryable } from '../../db/pool.js';
import type { ProjectScope } from '../../scope.js';
import type { FlowRow, FlowView } from './rows.js';
import type { FlowStatus, FlowStep, FlowType } from './schema.js';

/** The auth_flows table: each flow's state, its driver's heartbeat, and the hosted page's session. */

export const FLOW_COLUMNS = `f.id, f.connection_id, f.org_id, f.project_id, f.type, f.status, f.step, f.browser_session_id, f.view,
  f.error_code, f.error_message, f.website_error, f.post_login_url, f.input_seq, (f.pending_input IS NOT NULL) AS has_pending_input,
  f.handoff_used_at, f.driver, f.heartbeat_at, f.expires_at, f.started_at, f.updated_at, f.finished_at`;

/** to_jsonb turns timestamps into text: back to Dates, as pg returns them elsewhere. */
export function reviveFlow(raw: Record<string, unknown> | null): FlowRow | null {
  if (!raw) return null;
  const date = (value: unknown) => (value === null || value === undefined ? null : new Date(value as string));
  return {
    ...(raw as unknown as FlowRow),
    handoff_used_at: date(raw.handoff_used_at),
    heartbeat_at: date(raw.heartbeat_at),
    expires_at: date(raw.expires_at)!,
    started_at: date(raw.started_at)!,
    updated_at: date(raw.updated_at)!,
    finished_at: date(raw.finished_at),
  };
}

export interface NewFlow {
  id: string;
  connectionId: string;
  type: FlowType;
  handoffHash: string;
  driver: string;
  expiresAt: Date;
  now: Date;
}

/** Inserts a running flow and makes it the connection's current one. */
export async function insertFlow(db: Queryable, scope: ProjectScope, f: NewFlow): Promise<void> {
  await db.query(
    `INSERT INTO auth_flows (id, connection_id, org_id, project_id, type, status, step, handoff_hash, driver, heartbeat_at,
       expires_at, started_at, updated_at)
     VALUES ($1, $2, $3, $4, $5, 'IN_PROGRESS', 'DISCOVERING', $6, $7, $8, $9, $8, $8)`,
    [f.id, f.connectionId, scope.orgId, scope.projectId, f.type, f.handoffHash, f.driver, f.now, f.expiresAt],
  );
  await db.query('UPDATE auth_connections SET current_flow_id = $2, updated_at = $3 WHERE id = $1', [f.connectionId, f.id, f.now]);
}

export async function findFlow(db: Queryable, id: string): Promise<FlowRow | undefined> {
  const { rows } = await db.query(`SELECT ${FLOW_COLUMNS} FROM auth_flows f WHERE f.id = $1`, [id]);
  return rows[0] as FlowRow | undefined;
}

export type FlowChange = Partial<{
  status: FlowStatus;
  step: FlowStep;
  browser_session_id: string | null;
  view: FlowView;
  error_code: string | null;
  error_message: string | null;
  website_error: string | null;
  post_login_url: string | null;
  heartbeat_at: Date;
  finished_at: Date;
}>;

/**
 * Changes a running flow; false when it is no longer running (finished, or deleted with
 * its connection), which tells the driver to stop.
 */
export async function updateRunningFlow(db: Queryable, id: string, change: FlowChange, now: Date): Promise<boolean> {
  const entries = Object.entries(change).filter(([, value]) => value !== undefined);
  const sets = entries.map(([column], i) => `${column} = $${i + 3}`);
  const values = entries.map(([column, value]) => (column === 'view' ? JSON.stringify(value) : value));
  const { rowCount } = await db.query(
    `UPDATE auth_flows SET ${[...sets, 'updated_at = $2'].join(', ')} WHERE id = $1 AND status = 'IN_PROGRESS'`,
    [id, now, ...values],
  );
  return (rowCount ?? 0) > 0;
}

/** Stores a submission for the driver, only while the flow awaits input and holds none. */
export async function storePendingInput(db: Queryable, id: string, sealed: string, now: Date): Promise<boolean> {
  const { rowCount } = await db.query(
    `UPDATE auth_flows SET pending_input = $2, input_seq = input_seq + 1, updated_at = $3
      WHERE id = $1 AND status = 'IN_PROGRESS' AND step = 'AWAITING_INPUT' AND pending_input IS NULL`,
    [id, sealed, now],
  );
  return (rowCount ?? 0) > 0;
}

/** The driver takes the submission (and clears it) in one statement. */
export async function takePendingInput(db: Queryable, id: string): Promise<string | undefined> {
  const { rows } = await db.query<{ pending_input: string }>(
    `UPDATE auth_flows f SET pending_input = NULL FROM (SELECT id, pending_input FROM auth_flows WHERE id = $1 FOR UPDATE) old
      WHERE f.id = old.id AND old.pending_input IS NOT NULL RETURNING old.pending_input`,
    [id],
  );
  return rows[0]?.pending_input;
}

/** A finished flow keeps no submission, whether or not its driver took it. */
export async function clearPendingInput(db: Queryable, id: string): Promise<void> {
  await db.query('UPDATE auth_flows SET pending_input = NULL WHERE id = $1', [id]);
}

/** The heartbeat of the flows a replica drives (those still running). */
export async function beatFlows(db: Queryable, ids: string[], now: Date): Promise<void> {
  await db.query(`UPDATE auth_flows SET heartbeat_at = $2 WHERE id = ANY($1) AND status = 'IN_PROGRESS'`, [ids, now]);
}

/** Flows whose driver stopped beating (its replica died): failed by whoever sees them. */
type Orphan = { id: string; connection_id: string; browser_session_id: string | null };
export async function failOrphanedFlows(db: Queryable, staleBefore: Date, now: Date): Promise<Orphan[]> {
  const { rows } = await db.query<Orphan>(
    `UPDATE auth_flows SET status = CASE WHEN expires_at <= $2 THEN 'EXPIRED' ELSE 'FAILED' END, step = 'COMPLETED',
        error_code = CASE WHEN expires_at <= $2 THEN 'flow_expired' ELSE 'flow_interrupted' END,
        error_message = CASE WHEN expires_at <= $2 THEN 'The login flow expired' ELSE 'The service driving this login flow stopped' END,
        pending_input = NULL, finished_at = $2, updated_at = $2
      WHERE status = 'IN_PROGRESS' AND heartbeat_at < $1
      RETURNING id, connection_id, browser_session_id`,
    [staleBefore, now],
  );
  return rows;
}

// ---- hosted page ------------------------------------------------------------------

/** Exchanges the one-time handoff code: true once per code. */
export async function useHandoff(db: Queryable, flowId: string, handoffHash: string, pageTokenHash: string, now: Date): Promise<FlowRow | undefined> {
  const { rows } = await db.query(
    `UPDATE auth_flows f SET handoff_used_at = $4, page_token_hash = $3
      WHERE f.id = $1 AND f.handoff_hash = $2 AND f.handoff_used_at IS NULL AND f.status = 'IN_PROGRESS' AND f.expires_at > $4
      RETURNING ${FLOW_COLUMNS}`,
    [flowId, handoffHash, pageTokenHash, now],
  );
  return rows[0] as FlowRow | undefined;
}

export async function findFlowByPageToken(db: Queryable, flowId: string, pageTokenHash: string): Promise<FlowRow | undefined> {
  const { rows } = await db.query(`SELECT ${FLOW_COLUMNS} FROM auth_flows f WHERE f.id = $1 AND f.page_token_hash = $2`, [flowId, pageTokenHash]);
  return rows[0] as FlowRow | undefined;
}
