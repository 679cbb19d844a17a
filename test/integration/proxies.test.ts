import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ProxyUpstream } from '../../api/src/modules/proxies/upstreams.js';
import { errorFields } from '../support/http.js';
import { startTestApp, type TestApp } from '../support/test-app.js';

const upstreams: ProxyUpstream[] = [
  { name: 'dc', types: ['datacenter', 'isp'], countries: ['US', 'DE'], url: 'http://dc-user:dc-secret@127.0.0.1:3128' },
  { name: 'resi-berlin', types: ['residential'], countries: ['DE'], match: { city: ['berlin'] }, url: 'https://127.0.0.1:3129' },
  { types: ['mobile'], url: 'http://127.0.0.1:3130' },
];

const PASSWORD = 'pw-Plain-7c1f2e';

describe('proxies', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp({ proxy: { upstreams } });
  });
  afterAll(async () => app?.close());

  const http = () => app.tenant.http;
  const create = (body: unknown) => http().post('/proxies', body);
  const count = async () => (await app.database.db.query<{ n: number }>('SELECT count(*)::int AS n FROM proxies')).rows[0]!.n;

  describe('create', () => {
    it('creates a custom proxy, seals its password and only says that it has one', async () => {
      const res = await create({
        type: 'custom',
        name: 'office',
        bypass_hosts: ['localhost', '*.internal.example'],
        config: { host: 'proxy.example.com', port: 8080, username: 'bob', password: PASSWORD },
      });
      expect(res.status).toBe(200);
      expect(res.body).toEqual({
        id: expect.stringMatching(/^proxy_/),
        name: 'office',
        type: 'custom',
        protocol: 'http',
        bypass_hosts: ['localhost', '*.internal.example'],
        config: { host: 'proxy.example.com', port: 8080, username: 'bob', has_password: true },
      });
      expect(res.text).not.toContain(PASSWORD);
      const again = await http().get(`/proxies/${res.body.id}`);
      expect(again.body).toEqual(res.body);
      expect(again.text).not.toContain(PASSWORD);

      const { rows } = await app.database.db.query<{ row: string; password_sealed: string }>(
        'SELECT p::text AS row, password_sealed FROM proxies p WHERE id = $1',
        [res.body.id],
      );
      expect(rows[0]!.row).not.toContain(PASSWORD);
      expect(app.deps.sealer.open(rows[0]!.password_sealed, `proxy:${res.body.id}:password`)).toBe(PASSWORD);
      expect(() => app.deps.sealer.open(rows[0]!.password_sealed, 'proxy:proxy_other:password')).toThrow();
    });

    it('names a custom proxy host:port by default and says when it has no password', async () => {
      const res = await create({ type: 'custom', protocol: 'https', config: { host: '10.1.2.3', port: 3128 } });
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ name: '10.1.2.3:3128', protocol: 'https', bypass_hosts: [] });
      expect(res.body.config).toEqual({ host: '10.1.2.3', port: 3128, has_password: false });
    });

    it('binds each managed type to the first upstream that serves it', async () => {
      const dc = await create({ type: 'datacenter' });
      expect(dc.status).toBe(200);
      expect(dc.body).toMatchObject({ type: 'datacenter', name: 'datacenter-us', protocol: 'http', config: { country: 'US' } });
      const isp = await create({ type: 'isp', config: { country: 'de' } });
      expect(isp.body).toMatchObject({ type: 'isp', name: 'isp-de', config: { country: 'DE' } });
      const resi = await create({ type: 'residential', config: { country: 'DE', city: 'Berlin', asn: 'AS3320' } });
      expect(resi.status).toBe(200);
      expect(resi.body).toMatchObject({ protocol: 'https', config: { country: 'DE', city: 'Berlin', asn: 'AS3320' } });
      const mobile = await create({ type: 'mobile', name: 'phone', config: { country: 'US', state: 'ca' } });
      expect(mobile.body).toMatchObject({ name: 'phone', protocol: 'http', config: { country: 'US', state: 'CA' } });
      const bound = await app.database.db.query<{ id: string; upstream_key: string }>(
        'SELECT id, upstream_key FROM proxies WHERE id = ANY($1)',
        [[dc.body.id, isp.body.id, resi.body.id, mobile.body.id]],
      );
      expect(Object.fromEntries(bound.rows.map((r) => [r.id, r.upstream_key]))).toEqual({
        [dc.body.id]: 'dc',
        [isp.body.id]: 'dc',
        [resi.body.id]: 'resi-berlin',
        [mobile.body.id]: 'http://127.0.0.1:3130',
      });
      // The upstream's credentials are configuration, not part of the proxy.
      expect(JSON.stringify([dc.body, isp.body])).not.toContain('dc-secret');
    });

    it.each([
      ['a country no upstream serves', { type: 'datacenter', config: { country: 'FR' } }],
      ['a city no upstream serves', { type: 'residential', config: { country: 'DE', city: 'munich' } }],
      ['a protocol no upstream speaks', { type: 'datacenter', protocol: 'https' }],
      ['a residential proxy outside the served countries', { type: 'residential', config: { country: 'US' } }],
    ])('refuses a managed proxy with %s with a clear 400', async (_, body) => {
      const before = await count();
      const res = await create(body);
      expect(res.status).toBe(400);
      expect(res.body.code).toBe('no_matching_upstream');
      expect(res.body.message).toMatch(/No upstream proxy configured on this server serves/);
      expect(res.body.message).toContain('docs/PROXIES.md');
      expect(await count()).toBe(before);
    });

    it.each([
      ['no type', { config: { host: 'h', port: 1 } }, 'body.type'],
      ['an unknown type', { type: 'satellite' }, 'body.type'],
      ['custom without config', { type: 'custom' }, 'body.config'],
      ['custom without host', { type: 'custom', config: { port: 8080 } }, 'body.config.host'],
      ['custom without port', { type: 'custom', config: { host: 'h.example' } }, 'body.config.port'],
      ['port 0', { type: 'custom', config: { host: 'h.example', port: 0 } }, 'body.config.port'],
      ['port 65536', { type: 'custom', config: { host: 'h.example', port: 65536 } }, 'body.config.port'],
      ['port as text', { type: 'custom', config: { host: 'h.example', port: '8080' } }, 'body.config.port'],
      ['a host with spaces', { type: 'custom', config: { host: 'bad host', port: 1 } }, 'body.config.host'],
      ['a username with a colon', { type: 'custom', config: { host: 'h', port: 1, username: 'a:b' } }, 'body.config.username'],
      ['an empty password', { type: 'custom', config: { host: 'h', port: 1, password: '' } }, 'body.config.password'],
      ['a field of another type', { type: 'datacenter', config: { city: 'berlin' } }, 'body.config'],
      ['a custom field on a managed type', { type: 'isp', config: { host: 'h', port: 1 } }, 'body.config'],
      ['a three-letter country', { type: 'datacenter', config: { country: 'USA' } }, 'body.config.country'],
      ['an unknown country code', { type: 'datacenter', config: { country: 'QQ' } }, 'body.config.country'],
      ['a city without country', { type: 'residential', config: { city: 'berlin' } }, 'body.config.city'],
      ['a city with spaces', { type: 'residential', config: { country: 'US', city: 'san francisco' } }, 'body.config.city'],
      ['a zip outside the US', { type: 'residential', config: { country: 'DE', zip: '10115' } }, 'body.config.zip'],
      ['a malformed zip', { type: 'residential', config: { country: 'US', zip: '9410' } }, 'body.config.zip'],
      ['a three-letter state', { type: 'residential', config: { country: 'US', state: 'CAL' } }, 'body.config.state'],
      ['an unknown os', { type: 'residential', config: { os: 'linux' } }, 'body.config.os'],
      ['a malformed asn', { type: 'residential', config: { asn: 'comcast' } }, 'body.config.asn'],
      ['a mobile state outside the US', { type: 'mobile', config: { country: 'DE', state: 'BY' } }, 'body.config.state'],
      ['an unknown protocol', { type: 'datacenter', protocol: 'socks5' }, 'body.protocol'],
      ['a blank name', { type: 'datacenter', name: '   ' }, 'body.name'],
      ['a bad bypass host', { type: 'datacenter', bypass_hosts: ['not a host'] }, 'body.bypass_hosts.0'],
      ['an unknown field', { type: 'datacenter', colour: 'red' }, 'body'],
    ])('refuses %s with a 400 and creates nothing', async (_, body, field) => {
      const before = await count();
      const res = await create(body);
      expect(res.status).toBe(400);
      expect(res.body.code).toBe('invalid_request');
      expect(errorFields(res)).toContain(field);
      expect(await count()).toBe(before);
    });

    it('never echoes a password, even in a validation error', async () => {
      const res = await create({ type: 'custom', config: { host: 'bad host', port: 1, password: PASSWORD } });
      expect(res.status).toBe(400);
      expect(res.text).not.toContain(PASSWORD);
    });
  });

  describe('get, list, rename, delete', () => {
    it('answers 404 for an id that does not exist', async () => {
      for (const res of [
        await http().get('/proxies/proxy_nope'),
        await http().patch('/proxies/proxy_nope', { name: 'x' }),
        await http().delete('/proxies/proxy_nope'),
        await http().post('/proxies/proxy_nope/check', {}),
      ]) {
        expect(res.status).toBe(404);
        expect(res.body.code).toBe('not_found');
      }
    });

    it('lists newest first and filters by exact folded name, by substring of name, host or IP, and by id', async () => {
      const project = await http().post('/org/projects', { name: 'list-proxies' });
      const inProject = http().withHeaders({ 'X-Kernel-Project-Id': project.body.id });
      const a = (await inProject.post('/proxies', { type: 'datacenter', name: 'Équipe Nord' })).body;
      const b = (await inProject.post('/proxies', { type: 'datacenter', name: 'equipe nord' })).body;
      const c = (await inProject.post('/proxies', { type: 'custom', name: 'other', config: { host: 'squid.corp.example', port: 3128 } })).body;
      await app.database.db.query(`UPDATE proxies SET ip_address = '203.0.113.77' WHERE id = $1`, [a.id]);
      const ids = async (q: string) => (await inProject.get<Array<{ id: string }>>(`/proxies${q}`)).body.map((p) => p.id);

      expect(await ids('')).toEqual([c.id, b.id, a.id]);
      expect(await ids('?name=EQUIPE%20NORD')).toEqual([b.id, a.id]);
      expect(await ids('?name=equipe')).toEqual([]);
      expect(await ids('?query=quipe')).toEqual([b.id, a.id]);
      expect(await ids('?query=SQUID.corp')).toEqual([c.id]);
      expect(await ids('?query=113.77')).toEqual([a.id]);
      expect(await ids(`?query=${c.id}`)).toEqual([c.id]);
      expect(await ids('?query=100%25')).toEqual([]);

      const first = await inProject.get('/proxies?limit=2');
      expect(first.body).toHaveLength(2);
      expect(first.headers.get('x-has-more')).toBe('true');
      expect(first.headers.get('x-next-offset')).toBe('2');
      const last = await inProject.get<Array<{ id: string }>>('/proxies?limit=2&offset=2');
      expect(last.body.map((p) => p.id)).toEqual([a.id]);
      expect(last.headers.get('x-has-more')).toBe('false');
      expect(last.headers.get('x-next-offset')).toBe('0');
      expect((await inProject.get('/proxies?limit=0')).status).toBe(400);
      expect((await inProject.get('/proxies?limit=101')).status).toBe(400);
    });

    it('renames with a trimmed name, accepts duplicates and requires a name', async () => {
      const p = (await create({ type: 'datacenter', name: 'before' })).body;
      const other = (await create({ type: 'datacenter', name: 'taken' })).body;
      const renamed = await http().patch(`/proxies/${p.id}`, { name: '  taken  ' });
      expect(renamed.status).toBe(200);
      expect(renamed.body).toEqual({ ...p, name: 'taken' });
      expect((await http().get(`/proxies/${other.id}`)).body.name).toBe('taken');
      for (const [body, field] of [
        [{}, 'body.name'],
        [{ name: '' }, 'body.name'],
        [{ name: '   ' }, 'body.name'],
        [{ name: 'x'.repeat(256) }, 'body.name'],
        [{ name: 'ok', type: 'isp' }, 'body'],
      ] as const) {
        const res = await http().patch(`/proxies/${p.id}`, body);
        expect(res.status).toBe(400);
        expect(errorFields(res)).toContain(field);
      }
      expect((await http().get(`/proxies/${p.id}`)).body.name).toBe('taken');
    });

    it('deletes softly: the proxy is gone from every route and list, the row stays', async () => {
      const p = (await create({ type: 'custom', config: { host: 'gone.example', port: 1 } })).body;
      const res = await http().delete(`/proxies/${p.id}`);
      expect(res.status).toBe(204);
      expect((await http().get(`/proxies/${p.id}`)).status).toBe(404);
      expect((await http().patch(`/proxies/${p.id}`, { name: 'x' })).status).toBe(404);
      expect((await http().post(`/proxies/${p.id}/check`, {})).status).toBe(404);
      expect((await http().delete(`/proxies/${p.id}`)).status).toBe(404);
      expect((await http().get<Array<{ id: string }>>('/proxies?limit=100')).body.map((x) => x.id)).not.toContain(p.id);
      const { rows } = await app.database.db.query('SELECT deleted_at FROM proxies WHERE id = $1', [p.id]);
      expect(rows[0].deleted_at).toBeInstanceOf(Date);
    });
  });

  describe('tenancy', () => {
    it('hides a proxy from other orgs and other projects of the same org', async () => {
      const p = (await create({ type: 'datacenter', name: 'mine' })).body;
      const stranger = await app.newTenant('stranger');
      const project = await http().post('/org/projects', { name: 'elsewhere' });
      for (const client of [stranger.http, http().withHeaders({ 'X-Kernel-Project-Id': project.body.id })]) {
        expect((await client.get(`/proxies/${p.id}`)).status).toBe(404);
        expect((await client.patch(`/proxies/${p.id}`, { name: 'stolen' })).status).toBe(404);
        expect((await client.post(`/proxies/${p.id}/check`, {})).status).toBe(404);
        expect((await client.delete(`/proxies/${p.id}`)).status).toBe(404);
        expect((await client.get('/proxies?limit=100')).body).toEqual([]);
      }
      expect((await http().get(`/proxies/${p.id}`)).body.name).toBe('mine');
    });

    it('acts in the project a project-scoped key belongs to', async () => {
      const project = await http().post('/org/projects', { name: 'scoped-proxies' });
      const key = await http().post('/org/api_keys', { name: 'scoped', project_id: project.body.id });
      const scoped = app.client(key.body.key);
      const p = (await scoped.post('/proxies', { type: 'mobile' })).body;
      expect((await scoped.get(`/proxies/${p.id}`)).status).toBe(200);
      expect((await http().get(`/proxies/${p.id}`)).status).toBe(404);
      const { rows } = await app.database.db.query('SELECT project_id FROM proxies WHERE id = $1', [p.id]);
      expect(rows[0].project_id).toBe(project.body.id);
    });

    it('keeps a project with live proxies from being deleted', async () => {
      const project = await http().post('/org/projects', { name: 'has-proxies' });
      const inProject = http().withHeaders({ 'X-Kernel-Project-Id': project.body.id });
      const p = (await inProject.post('/proxies', { type: 'datacenter' })).body;
      const refused = await http().delete(`/org/projects/${project.body.id}`);
      expect(refused.status).toBe(409);
      expect(refused.body.code).toBe('project_not_empty');
      expect(errorFields(refused)).toContain('proxies');
      expect((await inProject.delete(`/proxies/${p.id}`)).status).toBe(204);
      expect((await http().delete(`/org/projects/${project.body.id}`)).status).toBe(204);
    });
  });

  describe('check url guard', () => {
    it.each([
      'http://127.0.0.1/',
      'http://localhost:8080/ip',
      'http://10.0.0.1/',
      'http://192.168.1.1/',
      'http://172.16.5.4/',
      'http://100.64.0.1/',
      'http://169.254.169.254/latest/meta-data/',
      'http://0.0.0.0/',
      'http://[::1]/',
      'http://[fe80::1]/',
      'http://[fd00::1]/',
      'http://[::ffff:127.0.0.1]/',
      'https://224.0.0.1/',
    ])('refuses a check of %s, which does not resolve to a public address', async (url) => {
      const p = (await create({ type: 'custom', config: { host: 'proxy.example', port: 3128 } })).body;
      const res = await http().post(`/proxies/${p.id}/check`, { url });
      expect(res.status).toBe(400);
      expect(res.body.details).toEqual([expect.objectContaining({ field: 'body.url', code: 'forbidden_address' })]);
      const after = (await http().get(`/proxies/${p.id}`)).body;
      expect(after.status).toBeUndefined();
      expect(after.last_checked).toBeUndefined();
    });

    it.each([
      ['not a URL', 'not a url'],
      ['another scheme', 'ftp://example.com/'],
      ['a file URL', 'file:///etc/passwd'],
    ])('refuses a check url that is %s', async (_, url) => {
      const p = (await create({ type: 'datacenter' })).body;
      const res = await http().post(`/proxies/${p.id}/check`, { url });
      expect(res.status).toBe(400);
      expect(errorFields(res)).toContain('body.url');
    });

    it('refuses credentials in the check url and unknown fields in the check body', async () => {
      const p = (await create({ type: 'datacenter' })).body;
      const creds = await http().post(`/proxies/${p.id}/check`, { url: 'http://user:pw@93.184.216.34/' });
      expect(creds.status).toBe(400);
      expect(errorFields(creds)).toEqual(['body.url']);
      const unknown = await http().post(`/proxies/${p.id}/check`, { target: 'x' });
      expect(unknown.status).toBe(400);
    });
  });
});
