import { expect } from 'vitest';
import type { HttpClient, HttpResponse } from '../support/http.js';
import type { TestApp } from '../support/test-app.js';

/** Shapes and helpers shared by the audit log tests. */

export interface AuditEntry {
  timestamp: string;
  method: string;
  path: string;
  route: string;
  status: number;
  duration_ms: number;
  auth_strategy: string;
  user_id: string;
  email: string;
  client_ip: string;
  domain: string;
  user_agent: string;
  service: string;
  request_id: string;
  resource_id: string | null;
  project_id: string | null;
  key_name: string;
}

export const HOUR = 3_600_000;

/** A window of an hour either side of the app's (fixed) clock, as list and export take it. */
export function windowAround(app: TestApp, extra: Record<string, string> = {}): string {
  const now = app.clock.now().getTime();
  return new URLSearchParams({ start: new Date(now - HOUR).toISOString(), end: new Date(now + HOUR).toISOString(), ...extra }).toString();
}

/** Every entry of the window with these filters, page by page (writes queued so far are flushed first). */
export async function allEntries(app: TestApp, http: HttpClient, extra: Record<string, string> = {}): Promise<AuditEntry[]> {
  await app.services.auditLog.flush();
  const out: AuditEntry[] = [];
  let token: string | null = null;
  for (let pages = 0; pages < 100; pages++) {
    const res: HttpResponse<AuditEntry[]> = await http.get(`/audit-logs?${windowAround(app, { ...extra, ...(token ? { page_token: token } : {}) })}`);
    expect(res.status, res.text).toBe(200);
    out.push(...res.body);
    token = res.headers.get('x-next-page-token');
    if (res.headers.get('x-has-more') !== 'true') return out;
  }
  throw new Error('more than 100 pages');
}

/** Every audit row of the database as text, for "this never appears anywhere" checks. */
export async function everyAuditRowText(app: TestApp): Promise<string> {
  await app.services.auditLog.flush();
  const { rows } = await app.database.db.query<{ row: string }>('SELECT a::text AS row FROM audit_logs a');
  return rows.map((r) => r.row).join('\n');
}
