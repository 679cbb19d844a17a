import { createHash } from 'node:crypto';
import { gunzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FixedClock } from '../../api/src/clock.js';
import { errorFields, type HttpClient } from '../support/http.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { allEntries, HOUR, type AuditEntry } from './audit-logs.fixtures.js';

/** Reading the audit log: filters, page tokens, export chunks, bad input. */
describe('audit logs: list and export', () => {
  let app: TestApp;
  let admin: HttpClient;
  let robot: { id: string; http: HttpClient };
  const t0 = new Date('2026-06-01T12:00:00Z');
  const clock = new FixedClock(t0);
  const MINUTE = 60_000;
  const window = { start: new Date(t0.getTime() - 30 * MINUTE).toISOString(), end: new Date(t0.getTime() + 30 * MINUTE).toISOString() };
  const query = (extra: Record<string, string> = {}) => new URLSearchParams({ ...window, ...extra }).toString();
  const at = (minutes: number) => clock.set(new Date(t0.getTime() + minutes * MINUTE));

  beforeAll(async () => {
    app = await startTestApp({ clock });
    admin = app.tenant.http;
    const key = await admin.post('/org/api_keys', { name: 'robot' });
    robot = { id: key.body.id as string, http: app.client(key.body.key as string) };
    at(-120);
    await admin.post('/proxies', { type: 'custom', name: 'long-ago', config: { host: 'old.test', port: 1 } });
    at(0);
    const proxy = await admin.post('/proxies', { type: 'custom', name: 'p1', config: { host: 'p1.test', port: 1 } });
    at(1);
    await admin.patch(`/proxies/${proxy.body.id}`, { name: 'p1-renamed' });
    at(2);
    await robot.http.delete('/proxies/proxy_nothere');
    at(3);
    await admin.post('/org/projects', { name: 'filtered' });
    at(4);
    await admin.delete(`/proxies/${proxy.body.id}`);
    at(0);
    await app.services.auditLog.flush();
  });
  afterAll(async () => app?.close());

  const list = async (extra: Record<string, string> = {}) => {
    const res = await admin.get<AuditEntry[]>(`/audit-logs?${query(extra)}`);
    expect(res.status, res.text).toBe(200);
    return res.body.map((e) => `${e.method} ${e.route} ${e.status}`);
  };

  it('lists the window newest first, [start, end)', async () => {
    expect(await list()).toEqual([
      'DELETE /proxies/{id} 204',
      'POST /org/projects 200',
      'DELETE /proxies/{id} 404',
      'PATCH /proxies/{id} 200',
      'POST /proxies 200',
      'POST /org/api_keys 200',
    ]);
    // The end is exclusive, the start inclusive.
    expect(await list({ start: t0.toISOString(), end: new Date(t0.getTime() + 4 * MINUTE).toISOString() })).toEqual([
      'POST /org/projects 200',
      'DELETE /proxies/{id} 404',
      'PATCH /proxies/{id} 200',
      'POST /proxies 200',
      'POST /org/api_keys 200',
    ]);
  });

  it('filters by method, excluded methods, service, auth strategy, search and user ids', async () => {
    expect(await list({ method: 'delete' })).toEqual(['DELETE /proxies/{id} 204', 'DELETE /proxies/{id} 404']);
    expect(await list({ exclude_method: 'POST,DELETE' })).toEqual(['PATCH /proxies/{id} 200']);
    expect(await list({ service: 'projects' })).toEqual(['POST /org/projects 200']);
    expect(await list({ auth_strategy: 'api_key' })).toHaveLength(6);
    expect(await list({ auth_strategy: 'oauth' })).toEqual([]);
    expect(await list({ search: '404' })).toEqual(['DELETE /proxies/{id} 404']);
    expect(await list({ search: 'NOTHERE' })).toEqual(['DELETE /proxies/{id} 404']);
    expect(await list({ search: '%' })).toEqual([]);
    expect(await list({ search_user_id: robot.id })).toEqual(['DELETE /proxies/{id} 404']);
    // search_user_id is ORed into the search.
    expect(await list({ search: '/org/projects', search_user_id: robot.id })).toEqual(['POST /org/projects 200', 'DELETE /proxies/{id} 404']);
  });

  it('pages with X-Next-Page-Token until X-Has-More is false, losing no entry that shares a timestamp', async () => {
    at(10);
    for (const name of ['same-1', 'same-2', 'same-3']) await admin.post('/proxies', { type: 'custom', name, config: { host: 'same.test', port: 1 } });
    at(0);
    const everything = await allEntries(app, admin, { ...window, limit: '100' });
    const paged = await allEntries(app, admin, { ...window, limit: '1' });
    expect(paged.map((e) => e.request_id)).toEqual(everything.map((e) => e.request_id));
    expect(new Set(paged.map((e) => e.request_id)).size).toBe(9);
    const first = await admin.get(`/audit-logs?${query({ limit: '4' })}`);
    expect(first.headers.get('x-has-more')).toBe('true');
    const last = await admin.get(`/audit-logs?${query({ limit: '4', page_token: first.headers.get('x-next-page-token')!, start: new Date(t0.getTime() + 2 * MINUTE).toISOString() })}`);
    expect(last.headers.get('x-has-more')).toBe('false');
    expect(last.headers.get('x-next-page-token')).toBeNull();
  });

  /** Every chunk of an export as the SDK's helper reads it, checking each as it does. */
  const exportAll = async (extra: Record<string, string>) => {
    const chunks: Buffer[] = [];
    let rows = 0;
    let cursor: string | null = null;
    for (;;) {
      const res = await fetch(`${app.url}/audit-logs/export/chunk?${query({ ...extra, ...(cursor ? { cursor } : {}) })}`, {
        headers: { authorization: `Bearer ${app.tenant.adminKey}`, accept: 'application/octet-stream', 'accept-encoding': 'gzip' },
      });
      expect(res.status).toBe(200);
      expect(res.headers.get('content-encoding')).toBeNull();
      const body = Buffer.from(await res.arrayBuffer());
      expect(res.headers.get('x-content-sha256')).toBe(createHash('sha256').update(body).digest('hex'));
      rows += Number(res.headers.get('x-row-count'));
      chunks.push(body);
      cursor = res.headers.get('x-next-cursor');
      if (res.headers.get('x-has-more') === 'false') {
        expect(cursor).toBeNull();
        return { chunks, rows, contentType: res.headers.get('content-type') };
      }
      expect(res.headers.get('x-has-more')).toBe('true');
      expect(cursor).toBeTruthy();
    }
  };

  it('exports jsonl in chunks that follow X-Next-Cursor, with the checksum of each', async () => {
    const listed = await allEntries(app, admin, window);
    const out = await exportAll({ format: 'jsonl', limit: '4' });
    expect(out.contentType).toBe('application/jsonl');
    expect(out.chunks.length).toBe(Math.ceil(listed.length / 4));
    const lines = Buffer.concat(out.chunks).toString().trimEnd().split('\n');
    expect(out.rows).toBe(listed.length);
    expect(lines.map((l) => JSON.parse(l) as AuditEntry)).toEqual(listed);
  });

  it('exports jsonl.gz by default: each chunk a gzip member, together one .jsonl.gz file', async () => {
    const listed = await allEntries(app, admin, window);
    const out = await exportAll({ limit: '3' });
    expect(out.contentType).toBe('application/gzip');
    expect(out.chunks.length).toBeGreaterThan(1);
    const text = gunzipSync(Buffer.concat(out.chunks)).toString();
    expect(text.trimEnd().split('\n').map((l) => JSON.parse(l) as AuditEntry)).toEqual(listed);
  });

  it('answers an empty window with an empty last chunk', async () => {
    const far = { start: new Date(t0.getTime() + 2 * HOUR).toISOString(), end: new Date(t0.getTime() + 3 * HOUR).toISOString() };
    const res = await admin.get(`/audit-logs/export/chunk?${new URLSearchParams({ ...far, format: 'jsonl' }).toString()}`);
    expect([res.status, res.text, res.headers.get('x-row-count'), res.headers.get('x-has-more')]).toEqual([200, '', '0', 'false']);
  });

  it('refuses bad input with a 400 that names the field', async () => {
    const cases: [string, string][] = [
      [`end=${window.end}`, 'query.start'],
      [`start=${window.start}`, 'query.end'],
      [query({ start: window.end, end: window.start }), 'query.end'],
      [query({ start: '2026-04-01T00:00:00Z', end: '2026-05-02T00:00:00Z' }), 'query.end'],
      [query({ start: 'yesterday' }), 'query.start'],
      [query({ method: 'BREW' }), 'query.method'],
      [query({ exclude_method: 'GET,BREW' }), 'query.exclude_method.1'],
      [query({ limit: '101' }), 'query.limit'],
      [query({ page_token: 'not-a-token' }), 'query.page_token'],
      [query({ page_token: Buffer.from('1.2.3').toString('base64url') }), 'query.page_token'],
    ];
    for (const [q, field] of cases) {
      const res = await admin.get(`/audit-logs?${q}`);
      expect([res.status, res.body.code], `${q}: ${res.text}`).toEqual([400, 'invalid_request']);
      expect(errorFields(res), q).toContain(field);
    }
    for (const [extra, field] of [[{ cursor: '%%%' }, 'query.cursor'], [{ format: 'csv' }, 'query.format'], [{ limit: '50001' }, 'query.limit']] as const) {
      const res = await admin.get(`/audit-logs/export/chunk?${query(extra)}`);
      expect(res.status, res.text).toBe(400);
      expect(errorFields(res)).toContain(field);
    }
  });
});
