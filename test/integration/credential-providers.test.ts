import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FixedClock } from '../../api/src/clock.js';
import { startConnectStandIn, type ConnectStandIn } from '../fixtures/onepassword-connect.js';
import { CapturedLog } from '../support/captured-log.js';
import { errorFields, type HttpClient, type HttpResponse } from '../support/http.js';
import { startTestApp, type TestApp } from '../support/test-app.js';

/**
 * Credential providers through the HTTP API, against a real Postgres and a local stand-in
 * for 1Password Connect (test/fixtures/onepassword-connect.ts): the real Connect server
 * cannot run here, so the stand-in serves Connect's documented JSON.
 */

type Json = Record<string, any>;

describe('credential providers', () => {
  let app: TestApp;
  let http: HttpClient;
  let connect: ConnectStandIn;
  const clock = new FixedClock(new Date('2026-06-01T00:00:00Z'));
  const captured = new CapturedLog();
  const responses: string[] = [];
  let seq = 0;
  const unique = (prefix: string) => `${prefix}-${++seq}`;

  const record = (res: HttpResponse) => {
    responses.push(res.text);
    return res;
  };

  beforeAll(async () => {
    connect = await startConnectStandIn([
      {
        name: 'Web',
        items: [
          { title: 'Example', urls: ['https://example.com/login'], username: 'alice', password: 'pw-1' },
          { title: 'Shop', urls: ['shop.example.org'], username: 'bob', password: 'pw-2' },
          { title: 'A note', category: 'SECURE_NOTE' },
        ],
      },
      { name: 'Ops', items: [{ title: 'Console', urls: ['https://console.ops.example'], username: 'root', password: 'pw-3' }] },
    ]);
    app = await startTestApp({ clock, log: captured.logger() });
    http = app.tenant.http;
  });
  afterAll(async () => {
    await app?.close();
    await connect?.close();
  });

  const create = async (body: Json = {}, client = http): Promise<Json> => {
    const res = record(await client.post('/org/credential_providers', { name: unique('op'), provider_type: 'onepassword', token: connect.token, connect_url: connect.url, ...body }));
    expect(res.status, res.text).toBe(200);
    return res.body as Json;
  };

  const expectError = (res: HttpResponse, status: number, code: string) => {
    expect(res.status, res.text).toBe(status);
    expect(res.body.code, res.text).toBe(code);
  };

  const ids = (res: HttpResponse) => (res.body as Json[]).map((p) => p.id as string);

  const rowCount = async () => (await app.database.db.query<{ n: number }>('SELECT count(*)::int AS n FROM credential_providers')).rows[0]!.n;

  describe('create and read', () => {
    it('creates a provider: its shape, no token, the token sealed in its row and bound to it', async () => {
      const created = await create({ name: '  my-1p  ', cache_ttl_seconds: 60 });
      expect(created).toEqual({
        id: expect.stringMatching(/^cpr_[a-z2-7]{24}$/),
        name: 'my-1p',
        provider_type: 'onepassword',
        enabled: true,
        priority: 0,
        connect_url: connect.url,
        cache_ttl_seconds: 60,
        created_at: clock.now().toISOString(),
        updated_at: clock.now().toISOString(),
      });
      expect((await http.get(`/org/credential_providers/${created.id}`)).body).toEqual(created);
      expect((await http.get('/org/credential_providers/MY-1P')).body).toEqual(created);
      const { rows } = await app.database.db.query<{ token_sealed: string }>('SELECT token_sealed FROM credential_providers WHERE id = $1', [created.id]);
      expect(rows[0]!.token_sealed).not.toContain(connect.token);
      expect(app.deps.sealer.open(rows[0]!.token_sealed, `credential-provider:${created.id}:token`)).toBe(connect.token);
      expect(() => app.deps.sealer.open(rows[0]!.token_sealed, 'credential-provider:cpr_other:token')).toThrow();
    });

    it('defaults cache_ttl_seconds to 300 and takes the service’s default Connect URL when none is sent', async () => {
      expect((await create()).cache_ttl_seconds).toBe(300);
      const body = { name: unique('default-url'), provider_type: 'onepassword', token: connect.token };
      expectError(record(await http.post('/org/credential_providers', body)), 400, 'connect_url_required');
      app.deps.settings.credentialProviders = { defaultConnectUrl: `${connect.url}/` };
      try {
        const res = await http.post('/org/credential_providers', body);
        expect(res.status, res.text).toBe(200);
        expect(res.body.connect_url).toBe(connect.url);
      } finally {
        app.deps.settings.credentialProviders = undefined;
      }
    });

    it('refuses bad input with 400, naming each field, and writes nothing', async () => {
      const before = await rowCount();
      const good = { name: unique('bad'), provider_type: 'onepassword', token: connect.token, connect_url: connect.url };
      const attempts: Array<[Json, string]> = [
        [{ ...good, provider_type: 'lastpass' }, 'body.provider_type'],
        [{ ...good, name: '   ' }, 'body.name'],
        [{ ...good, name: 'x'.repeat(256) }, 'body.name'],
        [{ ...good, name: 'cpr_aaaaaaaaaaaaaaaaaaaaaaaa' }, 'body.name'],
        [{ ...good, token: '' }, 'body.token'],
        [{ ...good, token: 'has space' }, 'body.token'],
        [{ ...good, connect_url: 'ftp://connect.example' }, 'body.connect_url'],
        [{ ...good, connect_url: 'http://user:pw@connect.example' }, 'body.connect_url'],
        [{ ...good, connect_url: 'not a url' }, 'body.connect_url'],
        [{ ...good, cache_ttl_seconds: -1 }, 'body.cache_ttl_seconds'],
        [{ ...good, cache_ttl_seconds: 86_401 }, 'body.cache_ttl_seconds'],
        [{ ...good, cache_ttl_seconds: 1.5 }, 'body.cache_ttl_seconds'],
        [{ ...good, enabled: false }, 'body'],
      ];
      for (const [body, field] of attempts) {
        const res = record(await http.post('/org/credential_providers', body));
        expectError(res, 400, 'invalid_request');
        expect(errorFields(res).some((f) => f === field || f.startsWith(`${field}.`)), `${JSON.stringify(body)}: ${res.text}`).toBe(true);
      }
      const { token: _t, ...missingToken } = good;
      expectError(record(await http.post('/org/credential_providers', missingToken)), 400, 'invalid_request');
      expect(await rowCount()).toBe(before);
    });

    it('refuses a second provider of the same name (case-insensitive) with 409', async () => {
      const first = await create();
      const res = record(await http.post('/org/credential_providers', { name: String(first.name).toUpperCase(), provider_type: 'onepassword', token: 't', connect_url: connect.url }));
      expectError(res, 409, 'credential_provider_name_taken');
      expect(res.headers.get('x-should-retry')).toBe('false');
    });

    it('answers 404 for an unknown provider on every route', async () => {
      for (const res of [
        await http.get('/org/credential_providers/cpr_nosuchprovider'),
        await http.patch('/org/credential_providers/nobody', { priority: 1 }),
        await http.delete('/org/credential_providers/nobody'),
        await http.get('/org/credential_providers/nobody/items'),
        await http.post('/org/credential_providers/nobody/test'),
      ]) {
        expectError(res, 404, 'not_found');
      }
    });
  });

  describe('list', () => {
    it('pages with X-Has-More and X-Next-Offset, lowest priority first, and filters by query', async () => {
      const other = await app.newTenant(unique('lister'));
      const make = async (name: string, priority: number) => {
        const res = await other.http.post('/org/credential_providers', { name, provider_type: 'onepassword', token: 't', connect_url: connect.url });
        expect(res.status, res.text).toBe(200);
        expect((await other.http.patch(`/org/credential_providers/${res.body.id}`, { priority })).status).toBe(200);
        return res.body as Json;
      };
      const low = await make('team-low', -5);
      const high = await make('team-high', 10);
      const mid = await make('other-mid', 0);
      const first = await other.http.get('/org/credential_providers?limit=2');
      expect(ids(first)).toEqual([low.id, mid.id]);
      expect(first.headers.get('x-has-more')).toBe('true');
      expect(first.headers.get('x-next-offset')).toBe('2');
      const second = await other.http.get('/org/credential_providers?limit=2&offset=2');
      expect(ids(second)).toEqual([high.id]);
      expect(second.headers.get('x-has-more')).toBe('false');
      expect(second.headers.get('x-next-offset')).toBe('0');
      expect(ids(await other.http.get('/org/credential_providers?query=TEAM'))).toEqual([low.id, high.id]);
      expect(ids(await other.http.get(`/org/credential_providers?query=${mid.id}`))).toEqual([mid.id]);
      expectError(await other.http.get('/org/credential_providers?limit=0'), 400, 'invalid_request');
    });
  });

  describe('update and delete', () => {
    it('renames, rotates the token, changes the URL, TTL, enabled and priority; only what is sent', async () => {
      const created = await create({ token: 'old-token' });
      clock.advance(1000);
      const res = record(await http.patch(`/org/credential_providers/${created.id}`, { name: unique('renamed'), token: connect.token, enabled: false, priority: 7, cache_ttl_seconds: 0 }));
      expect(res.status, res.text).toBe(200);
      expect(res.body).toMatchObject({ enabled: false, priority: 7, cache_ttl_seconds: 0, connect_url: connect.url, created_at: created.created_at, updated_at: clock.now().toISOString() });
      expect(res.body).not.toHaveProperty('token');
      const { rows } = await app.database.db.query<{ token_sealed: string }>('SELECT token_sealed FROM credential_providers WHERE id = $1', [created.id]);
      expect(app.deps.sealer.open(rows[0]!.token_sealed, `credential-provider:${created.id}:token`)).toBe(connect.token);
      const unchanged = await http.patch(`/org/credential_providers/${created.id}`, {});
      expect(unchanged.body).toEqual(res.body);
    });

    it('refuses bad updates with 400 or 409 and changes nothing', async () => {
      const a = await create();
      const b = await create();
      for (const [body, status, code] of [
        [{ priority: 'high' }, 400, 'invalid_request'],
        [{ enabled: 'yes' }, 400, 'invalid_request'],
        [{ connect_url: 'javascript:alert(1)' }, 400, 'invalid_request'],
        [{ provider_type: 'onepassword' }, 400, 'invalid_request'],
        [{ name: b.name }, 409, 'credential_provider_name_taken'],
      ] as Array<[Json, number, string]>) {
        expectError(record(await http.patch(`/org/credential_providers/${a.id}`, body)), status, code);
      }
      expect((await http.get(`/org/credential_providers/${a.id}`)).body).toEqual(a);
    });

    it('deletes with 204: the row and its sealed token are gone, then 404', async () => {
      const created = await create();
      const res = await http.delete(`/org/credential_providers/${created.id}`);
      expect(res.status, res.text).toBe(204);
      expectError(await http.get(`/org/credential_providers/${created.id}`), 404, 'not_found');
      expectError(await http.delete(`/org/credential_providers/${created.id}`), 404, 'not_found');
      const { rows } = await app.database.db.query('SELECT 1 FROM credential_providers WHERE id = $1', [created.id]);
      expect(rows).toEqual([]);
    });
  });

  describe('test and items (against the Connect stand-in)', () => {
    it('test: lists the vaults the token reads, sending the token as a Bearer token', async () => {
      const created = await create();
      const before = connect.requests.length;
      const res = record(await http.post(`/org/credential_providers/${created.id}/test`));
      expect(res.status, res.text).toBe(200);
      expect(res.body).toEqual({ success: true, vaults: connect.vaults.map(({ id, name }) => ({ id, name })) });
      expect(connect.requests.slice(before)).toEqual([{ method: 'GET', path: '/v1/vaults', authorization: `Bearer ${connect.token}` }]);
    });

    it('test: a wrong token is a 200 with success false and Connect’s 401 in the error', async () => {
      const created = await create({ token: 'wrong-token' });
      const res = record(await http.post(`/org/credential_providers/${created.id}/test`));
      expect(res.status, res.text).toBe(200);
      expect(res.body).toEqual({ success: false, vaults: [], error: expect.stringContaining('401') });
      expect(res.body.error).toContain('Invalid token signature');
    });

    it('test: an unreachable server is a 200 with success false', async () => {
      const created = await create({ connect_url: 'http://127.0.0.1:9' });
      const res = await http.post(`/org/credential_providers/${created.id}/test`);
      expect(res.status, res.text).toBe(200);
      expect(res.body).toMatchObject({ success: false, vaults: [], error: expect.stringContaining('could not be reached') });
    });

    it('items: the login items of every vault, with their paths and URLs, never a value', async () => {
      const created = await create();
      const res = record(await http.get(`/org/credential_providers/${created.id}/items`));
      expect(res.status, res.text).toBe(200);
      const [web, ops] = connect.vaults;
      const id = (vault: typeof web, title: string) => vault!.items.find((i) => i.title === title)!.id;
      expect(res.body).toEqual({
        items: [
          { id: id(ops, 'Console'), path: 'Ops/Console', title: 'Console', vault_id: ops!.id, vault_name: 'Ops', urls: ['https://console.ops.example'] },
          { id: id(web, 'Example'), path: 'Web/Example', title: 'Example', vault_id: web!.id, vault_name: 'Web', urls: ['https://example.com/login'] },
          { id: id(web, 'Shop'), path: 'Web/Shop', title: 'Shop', vault_id: web!.id, vault_name: 'Web', urls: ['shop.example.org'] },
        ],
      });
      for (const secret of ['pw-1', 'pw-2', 'pw-3']) expect(res.text).not.toContain(secret);
    });

    it('items: a wrong token answers 424 credential_provider_error, not retried', async () => {
      const created = await create({ token: 'wrong-token' });
      const res = await http.get(`/org/credential_providers/${created.id}/items`);
      expectError(res, 424, 'credential_provider_error');
      expect(res.headers.get('x-should-retry')).toBe('false');
    });

    it('items are cached in memory for cache_ttl_seconds, per provider as it is now', async () => {
      const created = await create({ cache_ttl_seconds: 60 });
      const calls = () => connect.count('/v1/vaults');
      const before = calls();
      await http.get(`/org/credential_providers/${created.id}/items`);
      const perListing = calls() - before;
      expect(perListing).toBe(3); // the vaults, then each vault's items
      await http.get(`/org/credential_providers/${created.id}/items`);
      expect(calls() - before).toBe(perListing);
      clock.advance(61_000);
      await http.get(`/org/credential_providers/${created.id}/items`);
      expect(calls() - before).toBe(2 * perListing);
      // A change to the provider (here its TTL: 0, never cached) is never served the old answer.
      await http.patch(`/org/credential_providers/${created.id}`, { cache_ttl_seconds: 0 });
      await http.get(`/org/credential_providers/${created.id}/items`);
      await http.get(`/org/credential_providers/${created.id}/items`);
      expect(calls() - before).toBe(4 * perListing);
    });
  });

  describe('isolation', () => {
    const everyRoute = (client: HttpClient, ref: string) => [
      client.get(`/org/credential_providers/${encodeURIComponent(ref)}`),
      client.patch(`/org/credential_providers/${encodeURIComponent(ref)}`, { enabled: false }),
      client.get(`/org/credential_providers/${encodeURIComponent(ref)}/items`),
      client.post(`/org/credential_providers/${encodeURIComponent(ref)}/test`),
      client.delete(`/org/credential_providers/${encodeURIComponent(ref)}`),
    ];

    it('refuses a project-scoped key on every route with 403 org_key_required', async () => {
      const mine = await create();
      const project = (await http.post('/org/projects', { name: unique('project') })).body as Json;
      const key = (await http.post('/org/api_keys', { name: unique('scoped'), project_id: project.id })).body as Json;
      const scoped = app.client(key.key as string);
      const results = [
        ...(await Promise.all(everyRoute(scoped, mine.id))),
        await scoped.get('/org/credential_providers'),
        await scoped.post('/org/credential_providers', { name: unique('x'), provider_type: 'onepassword', token: 't', connect_url: connect.url }),
      ];
      for (const res of results) expectError(res, 403, 'org_key_required');
      expect((await http.get(`/org/credential_providers/${mine.id}`)).body).toEqual(mine);
    });

    it('answers 404 to another org on every route, by id and by name, and lists nothing of ours', async () => {
      const mine = await create();
      const other = await app.newTenant(unique('intruder'));
      const before = connect.requests.length;
      for (const ref of [mine.id, mine.name]) {
        for (const res of await Promise.all(everyRoute(other.http, ref))) expectError(res, 404, 'not_found');
      }
      expect(connect.requests.length).toBe(before);
      expect((await other.http.get('/org/credential_providers?limit=100')).body).toEqual([]);
      expect((await other.http.get(`/org/credential_providers?query=${mine.id}`)).body).toEqual([]);
      expect((await http.get(`/org/credential_providers/${mine.id}`)).body).toEqual(mine);
      // The other org may use the same name.
      const theirs = await other.http.post('/org/credential_providers', { name: mine.name, provider_type: 'onepassword', token: 't', connect_url: connect.url });
      expect(theirs.status, theirs.text).toBe(200);
    });
  });

  it('never puts a token in a response or a log line', async () => {
    const secretToken = `never-shown-${unique('token')}`;
    const created = await create({ token: secretToken });
    record(await http.patch(`/org/credential_providers/${created.id}`, { token: secretToken }));
    record(await http.post(`/org/credential_providers/${created.id}/test`));
    record(await http.get(`/org/credential_providers/${created.id}/items`));
    record(await http.post('/org/credential_providers', { name: created.name, provider_type: 'onepassword', token: secretToken, connect_url: connect.url }));
    record(await http.post('/org/credential_providers', { name: 'x', provider_type: 'nope', token: secretToken }));
    const everything = [...responses, ...captured.lines].join('\n');
    expect(captured.lines.length).toBeGreaterThan(5);
    for (const secret of [secretToken, connect.token]) expect(everything).not.toContain(secret);
  });
});
