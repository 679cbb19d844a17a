import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FixedClock } from '../../api/src/clock.js';
import type { HttpClient, HttpResponse } from '../support/http.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { connectionHelpers, unique } from './auth-connections.fixtures.js';

/** Managed auth connections across orgs and projects: no route reaches another tenant's connection, and a project keeps its connections. */

describe('auth connections (no browser)', () => {
  let app: TestApp;
  let api: HttpClient;
  const clock = new FixedClock(new Date('2026-06-01T00:00:00Z'));

  beforeAll(async () => {
    app = await startTestApp({ clock });
    api = app.tenant.http;
  });
  afterAll(async () => app?.close());

  const { inNewProject, create, all, createProxy, jobOf, expectError } = connectionHelpers(() => app, clock);

  describe('tenancy', () => {
    /** The first org's connection, and three outsiders: another org, another project by header, a project key. */
    const arrange = async () => {
      const { http: owner, projectId } = await inNewProject();
      const cred = await owner.post('/credentials', { name: 'owned', domain: 'example.com', values: { username: 'u', password: 'p' } });
      expect(cred.status).toBe(200);
      const connection = await create(owner, {
        domain: 'example.com',
        profile_name: 'owned',
        credential: { name: 'owned' },
        allowed_domains: ['sso.example.net'],
      });
      const otherOrg = await app.newTenant(unique('other-org'));
      const { http: otherProject } = await inNewProject();
      const key = await api.post('/org/api_keys', { name: unique('project-key'), project_id: (await inNewProject()).projectId });
      expect(key.status, key.text).toBe(200);
      const outsiders: Array<[string, HttpClient]> = [
        ['another org', otherOrg.http],
        ['another project', otherProject],
        ['a key of another project', app.client(key.body.key)],
      ];
      return { owner, projectId, connection, outsiders, job: await jobOf(connection.id) };
    };

    it('answers 404 to every connection route from another org or project, and changes nothing', async () => {
      const { owner, connection, outsiders, job } = await arrange();
      const path = `/auth/connections/${connection.id}`;
      for (const [who, client] of outsiders) {
        const attempts: Array<[string, Promise<HttpResponse>]> = [
          ['get', client.get(path)],
          ['patch', client.patch(path, { health_checks: false, login_url: 'https://evil.example/' })],
          ['login', client.post(`${path}/login`, {})],
          ['submit', client.post(`${path}/submit`, { field_values: { username: 'x' } })],
          ['timeline', client.get(`${path}/timeline`)],
          ['delete', client.delete(path)],
        ];
        for (const [what, attempt] of attempts) {
          const res = await attempt;
          expect(res.status, `${who} ${what}: ${res.text}`).toBe(404);
          expect(res.body.code).toBe('not_found');
        }
        const events = await fetch(`${client.baseUrl}${path}/events`, {
          headers: { authorization: `Bearer ${client.key}`, accept: 'text/event-stream', ...client.extraHeaders },
        });
        expect(events.status, `${who} events`).toBe(404);
        await events.body?.cancel();
      }
      expect((await owner.get(path)).body).toEqual(connection);
      expect(await jobOf(connection.id)).toEqual(job);
      const { rows } = await app.database.db.query('SELECT id FROM auth_flows WHERE connection_id = $1', [connection.id]);
      expect(rows).toEqual([]);
    });

    it('never lists another org’s or project’s connections, whatever the filter', async () => {
      const { connection, outsiders } = await arrange();
      for (const [who, client] of outsiders) {
        for (const query of ['', `&query=${connection.id}`, '&domain=example.com', '&profile_name=owned', '&query=owned']) {
          const res = await client.get(`/auth/connections?limit=100${query}`);
          expect(res.status, `${who} ${query}`).toBe(200);
          expect(res.text, `${who} ${query}`).not.toContain(connection.id);
        }
      }
    });

    it('does not let another project use the owner’s credential or proxy, or see its profile', async () => {
      const { owner, outsiders } = await arrange();
      const proxy = await createProxy(owner, 'owned');
      for (const [who, client] of outsiders) {
        const before = await all(client);
        expectError(await client.post('/auth/connections', { domain: 'x.example.com', profile_name: 'q', credential: { name: 'owned' } }), 404, 'not_found');
        expectError(await client.post('/auth/connections', { domain: 'x.example.com', profile_name: 'q', proxy: { id: proxy.body.id } }), 404, 'not_found');
        expectError(await client.post('/auth/connections', { domain: 'x.example.com', profile_name: 'q', proxy: { name: 'owned' } }), 400, 'invalid_proxy');
        expect(await all(client), who).toEqual(before);
        // The same profile name and domain elsewhere is another profile and another connection.
        const own = await create(client, { domain: 'example.com', profile_name: 'owned', health_checks: false });
        expect(own.can_reauth).toBe(false);
        expect((await client.delete(`/auth/connections/${own.id}`)).status).toBe(204);
      }
    });
  });

  describe('project deletion', () => {
    it('is refused while a connection exists, naming auth_connections, and allowed once it is deleted', async () => {
      const { http: client, projectId } = await inNewProject();
      const connection = await create(client, { domain: 'example.com', profile_name: 'p' });
      // The profile also keeps the project: delete it so only the connection counts.
      expect((await client.delete('/profiles/p')).status).toBe(204);
      const refused = await api.delete(`/org/projects/${projectId}`);
      expectError(refused, 409, 'project_not_empty');
      expect(refused.body.details).toEqual([expect.objectContaining({ field: 'auth_connections', message: '1 active auth_connections' })]);
      expect((await client.get(`/auth/connections/${connection.id}`)).status).toBe(200);
      expect((await client.delete(`/auth/connections/${connection.id}`)).status).toBe(204);
      expect((await api.delete(`/org/projects/${projectId}`)).status).toBe(204);
    });
  });
});
