import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FixedClock } from '../../api/src/clock.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { allKeys, createKey, createProject, idsOf, withoutPlaintext, type ApiKey } from './api-keys.fixtures.js';

/** Organisations must not see or touch each other's keys or projects. */
describe('tenant isolation of API keys', () => {
  let app: TestApp;
  const clock = new FixedClock(new Date('2026-07-01T00:00:00Z'));

  beforeAll(async () => {
    app = await startTestApp({ clock });
  });
  afterAll(async () => app?.close());

  /** Two orgs; B has a project and a key in it. */
  const arrange = async () => {
    const a = await app.newTenant('alpha');
    const b = await app.newTenant('bravo');
    const bProject = await createProject(b, 'bravo project');
    const bKey = await createKey(b, { name: 'bravo secret', project_id: bProject.id });
    return { a, b, bProject, bKey, bShown: withoutPlaintext(bKey) };
  };

  it('answers 404 to another org’s key on get, rename, delete and rotate', async () => {
    const { a, bKey } = await arrange();
    const attempts = [
      a.http.get(`/org/api_keys/${bKey.id}`),
      a.http.get(`/org/api_keys/${bKey.id}?include_deleted=true`),
      a.http.patch(`/org/api_keys/${bKey.id}`, { name: 'hijacked' }),
      a.http.delete(`/org/api_keys/${bKey.id}`),
      a.http.post(`/org/api_keys/${bKey.id}/rotate`, { expire_in_days: 0 }),
      a.http.post(`/org/api_keys/${bKey.id}/rotate`),
    ];
    for (const res of await Promise.all(attempts)) {
      expect(res.status).toBe(404);
      expect(res.body.code).toBe('not_found');
    }
  });

  it('leaves the other org’s key exactly as it was after those attempts', async () => {
    const { a, b, bKey, bShown } = await arrange();
    await a.http.patch(`/org/api_keys/${bKey.id}`, { name: 'hijacked' });
    await a.http.post(`/org/api_keys/${bKey.id}/rotate`, { expire_in_days: 0 });
    await a.http.delete(`/org/api_keys/${bKey.id}`);
    expect((await b.http.get(`/org/api_keys/${bKey.id}`)).body).toEqual(bShown);
    expect(idsOf(await allKeys(b.http))).toEqual([bKey.id, b.adminKeyId].sort());
    // B's project key still authenticates (it is refused on org routes, not unauthorised).
    expect((await app.client(bKey.key).get('/org/api_keys')).status).toBe(403);
  });

  it('answers 404 to an org deleting a key of another org that it already deleted', async () => {
    const { a, b, bKey } = await arrange();
    expect((await b.http.delete(`/org/api_keys/${bKey.id}`)).status).toBe(204);
    expect((await a.http.get(`/org/api_keys/${bKey.id}?include_deleted=true`)).status).toBe(404);
  });

  it.each([
    ['every status', '?status=all&limit=100'],
    ['the other key’s id', (k: { id: string }) => `?query=${k.id}`],
    ['the other key’s masked key', (k: { masked_key: string }) => `?query=${encodeURIComponent(k.masked_key)}`],
    ['the other key’s name', '?query=bravo%20secret'],
    ['the other key’s exact name', '?name=bravo%20secret'],
    ['the other org’s project name', '?query=bravo%20project'],
    ['the other org’s owner email', '?query=bravo%40example.test'],
  ])('never lists another org’s keys, even searching by %s', async (_case, query) => {
    const { a, bKey } = await arrange();
    const aKey = await createKey(a, { name: 'alpha own' });
    const path = `/org/api_keys${typeof query === 'string' ? query : query(bKey)}`;
    const res = await a.http.get<ApiKey[]>(path);
    expect(res.status).toBe(200);
    for (const key of res.body) expect([aKey.id, a.adminKeyId]).toContain(key.id);
    expect(res.text).not.toContain(bKey.id);
  });

  it('still finds the org’s own keys with the same searches', async () => {
    const { b, bKey } = await arrange();
    for (const q of [bKey.id, bKey.masked_key, 'bravo secret', 'bravo project', 'bravo@example.test']) {
      const res = await b.http.get<ApiKey[]>(`/org/api_keys?query=${encodeURIComponent(q)}`);
      expect(idsOf(res.body), q).toContain(bKey.id);
    }
  });

  it('refuses to scope a key to another org’s project, by id or by name', async () => {
    const { a, bProject } = await arrange();
    const before = await allKeys(a.http);
    for (const projectId of [bProject.id, bProject.name]) {
      const res = await a.http.post('/org/api_keys', { name: 'sneaky', project_id: projectId });
      expect(res.status, projectId).toBe(404);
      expect(res.body.code).toBe('not_found');
    }
    expect(await allKeys(a.http)).toEqual(before);
  });

  it('scopes a key to the org’s own project when another org has one of the same name', async () => {
    const { a, bProject } = await arrange();
    const aProject = await createProject(a, bProject.name);
    const key = await createKey(a, { name: 'mine', project_id: bProject.name });
    expect(key.project_id).toBe(aProject.id);
  });

  it('records the creator from the caller’s own org', async () => {
    const { a } = await arrange();
    const key = await createKey(a, { name: 'mine' });
    expect(key.created_by).toEqual({ id: a.adminKeyId, email: 'alpha@example.test', name: 'admin' });
  });
});
