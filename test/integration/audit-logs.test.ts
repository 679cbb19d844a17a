import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FixedClock } from '../../api/src/clock.js';
import type { HttpClient } from '../support/http.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { allEntries, everyAuditRowText, windowAround, type AuditEntry } from './audit-logs.fixtures.js';

/** What the route chain records: who, what, when, how it ended; never bodies, secrets or reads. */
describe('audit logs: recording', () => {
  let app: TestApp;
  let admin: HttpClient;
  let project: { id: string };
  let scoped: { id: string; key: string; http: HttpClient };
  const clock = new FixedClock(new Date('2026-06-01T12:00:00Z'));

  beforeAll(async () => {
    app = await startTestApp({ clock });
    admin = app.tenant.http;
    project = (await admin.post('/org/projects', { name: 'audited' })).body as { id: string };
    const key = await admin.post('/org/api_keys', { name: 'ci-robot', project_id: project.id });
    expect(key.status, key.text).toBe(200);
    scoped = { id: key.body.id, key: key.body.key, http: app.client(key.body.key as string) };
  });
  afterAll(async () => app?.close());

  const byRequest = (entries: AuditEntry[], requestId: string | null) => entries.find((e) => e.request_id === requestId);

  it('records a create, a rename and a delete by two keys with who, what, where and how it ended', async () => {
    const created = await scoped.http.post('/proxies', { type: 'custom', name: 'audited-proxy', config: { host: 'proxy.test', port: 3128 } }, { 'user-agent': 'audit-test/1' });
    expect(created.status, created.text).toBe(200);
    const id = created.body.id as string;
    const renamed = await admin.patch(`/proxies/${id}`, { name: 'renamed' }, { 'X-Kernel-Project-Id': project.id });
    const deleted = await admin.delete(`/proxies/${id}`, undefined, { 'X-Kernel-Project-Id': project.id });
    expect([renamed.status, deleted.status]).toEqual([200, 204]);

    const entries = await allEntries(app, admin);
    expect(byRequest(entries, created.headers.get('x-request-id'))).toEqual({
      timestamp: clock.now().toISOString(),
      method: 'POST',
      path: '/proxies',
      route: '/proxies',
      status: 200,
      duration_ms: expect.any(Number),
      auth_strategy: 'api_key',
      user_id: scoped.id,
      email: '',
      client_ip: expect.stringContaining('127.0.0.1'),
      domain: '127.0.0.1',
      user_agent: 'audit-test/1',
      service: 'proxies',
      request_id: created.headers.get('x-request-id'),
      resource_id: id,
      project_id: project.id,
      key_name: 'ci-robot',
    });
    expect(byRequest(entries, renamed.headers.get('x-request-id'))).toMatchObject({
      method: 'PATCH',
      path: `/proxies/${id}`,
      route: '/proxies/{id}',
      status: 200,
      user_id: app.tenant.adminKeyId,
      key_name: 'admin',
      resource_id: id,
      project_id: project.id,
    });
    expect(byRequest(entries, deleted.headers.get('x-request-id'))).toMatchObject({ method: 'DELETE', status: 204, resource_id: id, route: '/proxies/{id}' });
  });

  it('records refused and failed calls with their status: bad body, unknown id, wrong scope, deleted key', async () => {
    const bad = await scoped.http.post('/proxies', { type: 'custom', config: { host: 'proxy.test', port: 'x' } });
    const missing = await scoped.http.delete('/proxies/proxy_nothere');
    const wrongScope = await scoped.http.post('/org/projects', { name: 'not-allowed' });
    const doomed = await admin.post('/org/api_keys', { name: 'doomed' });
    expect((await admin.delete(`/org/api_keys/${doomed.body.id}`)).status).toBe(204);
    const revoked = await app.client(doomed.body.key as string).post('/proxies', { type: 'custom', config: { host: 'h.test', port: 1 } });
    expect([bad.status, missing.status, wrongScope.status, revoked.status]).toEqual([400, 404, 403, 401]);

    const entries = await allEntries(app, admin);
    expect(byRequest(entries, bad.headers.get('x-request-id'))).toMatchObject({ status: 400, user_id: scoped.id, route: '/proxies' });
    expect(byRequest(entries, missing.headers.get('x-request-id'))).toMatchObject({ status: 404, resource_id: 'proxy_nothere' });
    expect(byRequest(entries, wrongScope.headers.get('x-request-id'))).toMatchObject({ status: 403, user_id: scoped.id, project_id: project.id, route: '/org/projects' });
    expect(byRequest(entries, revoked.headers.get('x-request-id'))).toMatchObject({ status: 401, user_id: doomed.body.id, key_name: 'doomed' });
  });

  it('records no reads, and no call of a key nobody knows (it belongs to no org)', async () => {
    const read = await admin.get('/proxies');
    const stranger = await app.client('bp_not-a-key-of-anyone').post('/proxies', {});
    const none = await app.client().delete('/proxies/proxy_x');
    expect([read.status, stranger.status, none.status]).toEqual([200, 401, 401]);
    const ids = [read, stranger, none].map((r) => r.headers.get('x-request-id'));
    await app.services.auditLog.flush();
    const { rows } = await app.database.db.query('SELECT 1 FROM audit_logs WHERE request_id = ANY($1)', [ids]);
    expect(rows).toEqual([]);
    expect((await allEntries(app, admin)).filter((e) => e.method === 'GET')).toEqual([]);
  });

  it('keeps no body: a credential\'s values, a new key\'s plaintext and the query string appear in no row', async () => {
    const secret = 'hunter2-audit-secret';
    const cred = await admin.post('/credentials?token=query-secret-123', { name: 'audited-cred', domain: 'example.com', values: { username: 'alice-audit', password: secret } });
    expect(cred.status, cred.text).toBe(200);
    const key = await admin.post('/org/api_keys', { name: 'shown-once' });
    const rows = await everyAuditRowText(app);
    for (const hidden of [secret, 'alice-audit', key.body.key as string, 'query-secret-123', 'token=']) expect(rows).not.toContain(hidden);
    const entries = await allEntries(app, admin);
    expect(byRequest(entries, cred.headers.get('x-request-id'))).toMatchObject({ path: '/credentials', resource_id: cred.body.id, service: 'credentials' });
    expect(byRequest(entries, key.headers.get('x-request-id'))).toMatchObject({ path: '/org/api_keys', resource_id: key.body.id, service: 'api_keys' });
  });

  it('shows an org only its own entries, and refuses project-scoped keys (the log is the org\'s)', async () => {
    const other = await app.newTenant('other-org');
    const theirs = await other.http.post('/proxies', { type: 'custom', name: 'theirs', config: { host: 'b.test', port: 1 } });
    expect(theirs.status).toBe(200);
    await admin.post('/proxies', { type: 'custom', name: 'ours', config: { host: 'a.test', port: 1 } });

    const mine = await allEntries(app, admin);
    const seenByOther = await allEntries(app, other.http);
    expect(mine.length).toBeGreaterThan(0);
    expect(mine.map((e) => e.request_id)).not.toContain(theirs.headers.get('x-request-id'));
    expect(seenByOther.map((e) => e.user_id)).toEqual([other.adminKeyId]);
    // Filtering by the other org's key id finds nothing of it either.
    expect(await allEntries(app, admin, { search_user_id: other.adminKeyId })).toEqual([]);
    expect(await allEntries(app, admin, { search: other.adminKeyId })).toEqual([]);

    const refused = await scoped.http.get(`/audit-logs?${windowAround(app)}`);
    expect(refused.status).toBe(403);
    expect(refused.body.code).toBe('org_key_required');
    const refusedExport = await scoped.http.get(`/audit-logs/export/chunk?${windowAround(app)}`);
    expect(refusedExport.status).toBe(403);
  });
});
