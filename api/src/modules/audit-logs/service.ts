import { promisify } from 'node:util';
import { gzip } from 'node:zlib';
import { createHash } from 'node:crypto';
import type { AppDeps } from '../../app-deps.js';
import { badRequest } from '../../http/errors.js';
import type { OrgScope } from '../../scope.js';
import type { AuditFilter, AuditLogEntry } from './schema.js';
import { listAuditRows, type AuditLogRow, type Position } from './store.js';

const gzipAsync = promisify(gzip);

/**
 * A place in the newest-first order as an opaque token (the list's X-Next-Page-Token,
 * the export's X-Next-Cursor): the timestamp and sequence of the last entry given.
 */
export function encodePosition(row: AuditLogRow): string {
  return Buffer.from(`${row.timestamp.getTime()}.${row.seq}`).toString('base64url');
}

export function decodePosition(token: string | undefined, field: string): Position | undefined {
  if (token === undefined) return undefined;
  const text = /^[A-Za-z0-9_-]+$/.test(token) ? Buffer.from(token, 'base64url').toString() : '';
  const match = /^(\d{1,15})\.(\d{1,19})$/.exec(text);
  const ms = match ? Number(match[1]) : NaN;
  if (!match || !Number.isSafeInteger(ms) || BigInt(match[2]!) > 2n ** 63n - 1n) {
    throw badRequest('invalid_request', `${field} is not a token this API gave`, [
      { code: 'invalid_token', field: `query.${field}`, message: `${field} is not a token this API gave` },
    ]);
  }
  return { timestamp: new Date(ms), seq: match[2]! };
}

export function presentAuditLogEntry(row: AuditLogRow): AuditLogEntry {
  return {
    timestamp: row.timestamp.toISOString(),
    method: row.method,
    path: row.path,
    route: row.route,
    status: row.status,
    duration_ms: row.duration_ms,
    auth_strategy: row.auth_strategy,
    user_id: row.user_id,
    email: '',
    client_ip: row.client_ip,
    domain: row.domain,
    user_agent: row.user_agent,
    service: row.service,
    request_id: row.request_id,
    resource_id: row.resource_id,
    project_id: row.project_id,
    key_name: row.key_name,
  };
}

export interface AuditPage {
  entries: AuditLogEntry[];
  /** The token of the next (older) page; undefined on the last one. */
  next: string | undefined;
}

/** One page of the org's entries in the window, newest first. */
export async function listAuditLogs(deps: AppDeps, scope: OrgScope, filter: AuditFilter, token: { value: string | undefined; field: string }, limit: number): Promise<AuditPage> {
  const rows = await listAuditRows(deps.db, scope.orgId, filter, decodePosition(token.value, token.field), limit);
  const shown = rows.slice(0, limit);
  const last = shown.at(-1);
  return { entries: shown.map(presentAuditLogEntry), next: rows.length > limit && last ? encodePosition(last) : undefined };
}

export interface ExportChunk {
  body: Buffer;
  rows: number;
  sha256: string;
  next: string | undefined;
}

/**
 * One export chunk: the entries as JSON Lines, gzip-compressed for jsonl.gz. Each chunk
 * of jsonl.gz is a whole gzip member, so the chunks written one after another are one
 * valid .jsonl.gz file (gzip allows concatenated members).
 */
export async function exportAuditChunk(
  deps: AppDeps,
  scope: OrgScope,
  filter: AuditFilter,
  options: { cursor?: string | undefined; format: 'jsonl' | 'jsonl.gz'; limit: number },
): Promise<ExportChunk> {
  const page = await listAuditLogs(deps, scope, filter, { value: options.cursor, field: 'cursor' }, options.limit);
  const text = Buffer.from(page.entries.map((entry) => `${JSON.stringify(entry)}\n`).join(''));
  const body = options.format === 'jsonl.gz' ? await gzipAsync(text) : text;
  return { body, rows: page.entries.length, sha256: createHash('sha256').update(body).digest('hex'), next: page.next };
}
