import type { Queryable } from '../../db/pool.js';
import type { ApiCall } from '../../http/call-audit.js';
import type { AuditFilter } from './schema.js';

export interface AuditLogRow {
  seq: string;
  org_id: string;
  project_id: string | null;
  timestamp: Date;
  method: string;
  path: string;
  route: string;
  service: string;
  resource_id: string | null;
  status: number;
  duration_ms: number;
  request_id: string;
  auth_strategy: string;
  user_id: string;
  key_name: string;
  client_ip: string;
  domain: string;
  user_agent: string;
}

/** A place in the newest-first order: entries strictly older than it come next. */
export interface Position {
  timestamp: Date;
  seq: string;
}

/** How every call here authenticated: API keys are the only credential of this API. */
export const API_KEY_STRATEGY = 'api_key';

const COLUMNS: [keyof AuditLogRow, string, (c: ApiCall) => unknown][] = [
  ['org_id', 'text', (c) => c.orgId],
  ['project_id', 'text', (c) => c.projectId],
  ['timestamp', 'timestamptz', (c) => c.timestamp],
  ['method', 'text', (c) => c.method],
  ['path', 'text', (c) => c.path],
  ['route', 'text', (c) => c.route],
  ['service', 'text', (c) => c.service],
  ['resource_id', 'text', (c) => c.resourceId],
  ['status', 'int', (c) => c.status],
  ['duration_ms', 'int', (c) => c.durationMs],
  ['request_id', 'text', (c) => c.requestId],
  ['auth_strategy', 'text', () => API_KEY_STRATEGY],
  ['user_id', 'text', (c) => c.keyId],
  ['key_name', 'text', (c) => c.keyName],
  ['client_ip', 'text', (c) => c.clientIp],
  ['domain', 'text', (c) => c.domain],
  ['user_agent', 'text', (c) => c.userAgent],
];

/** Writes many calls in one statement (one array parameter per column). */
export async function insertCalls(db: Queryable, calls: ApiCall[]): Promise<void> {
  if (!calls.length) return;
  const names = COLUMNS.map(([name]) => name).join(', ');
  const arrays = COLUMNS.map(([, type], i) => `$${i + 1}::${type}[]`).join(', ');
  await db.query(
    `INSERT INTO audit_logs (${names}) SELECT * FROM unnest(${arrays})`,
    COLUMNS.map(([, , value]) => calls.map(value)),
  );
}

/** LIKE's wildcards taken literally. */
const literal = (text: string) => `%${text.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;

/** The WHERE clause of one org's window with the filters; parameters from $1. */
function whereOf(orgId: string, filter: AuditFilter, after: Position | undefined): { sql: string; values: unknown[] } {
  const values: unknown[] = [orgId, filter.start, filter.end];
  const clauses = ['org_id = $1', 'timestamp >= $2', 'timestamp < $3'];
  const param = (value: unknown) => `$${values.push(value)}`;
  if (filter.method) clauses.push(`method = ${param(filter.method)}`);
  if (filter.exclude_method?.length) clauses.push(`NOT (method = ANY(${param(filter.exclude_method)}::text[]))`);
  if (filter.auth_strategy) clauses.push(`auth_strategy = ${param(filter.auth_strategy)}`);
  if (filter.service) clauses.push(`service = ${param(filter.service)}`);
  const either: string[] = [];
  if (filter.search) {
    const p = param(literal(filter.search));
    either.push(`(path ILIKE ${p} OR route ILIKE ${p} OR user_id ILIKE ${p} OR key_name ILIKE ${p} OR client_ip ILIKE ${p} OR status::text ILIKE ${p})`);
  }
  if (filter.search_user_id?.length) either.push(`user_id = ANY(${param(filter.search_user_id)}::text[])`);
  if (either.length) clauses.push(`(${either.join(' OR ')})`);
  if (after) clauses.push(`(timestamp, seq) < (${param(after.timestamp)}, ${param(after.seq)}::bigint)`);
  return { sql: clauses.join(' AND '), values };
}

/** One org's entries in the window, newest first, after `after`; `limit + 1` rows so has-more needs no count. */
export async function listAuditRows(db: Queryable, orgId: string, filter: AuditFilter, after: Position | undefined, limit: number): Promise<AuditLogRow[]> {
  const where = whereOf(orgId, filter, after);
  const { rows } = await db.query<AuditLogRow>(
    `SELECT * FROM audit_logs WHERE ${where.sql} ORDER BY timestamp DESC, seq DESC LIMIT ${limit + 1}`,
    where.values,
  );
  return rows;
}

/** Deletes at most `batch` entries older than `cutoff` (of every org); how many it deleted. */
export async function deleteAuditRowsBefore(db: Queryable, cutoff: Date, batch: number): Promise<number> {
  const { rowCount } = await db.query(
    `DELETE FROM audit_logs WHERE seq IN (SELECT seq FROM audit_logs WHERE timestamp < $1 ORDER BY timestamp LIMIT $2)`,
    [cutoff, batch],
  );
  return rowCount ?? 0;
}
