import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startConnectStandIn, type ConnectStandIn } from '../fixtures/onepassword-connect.js';
import type { HttpClient } from '../support/http.js';
import { startTestApp, type TestApp } from '../support/test-app.js';

/**
 * The bounds of the calls to a credential provider: the private-network block, the
 * timeout, the answer size and the per-org cap. Against a local stand-in for 1Password
 * Connect (test/fixtures/onepassword-connect.ts; the real server cannot run here) and a
 * raw server that misbehaves on purpose.
 */

type Json = Record<string, any>;

let connect: ConnectStandIn;
let misbehaving: http.Server;
let misbehavingUrl: string;

beforeAll(async () => {
  connect = await startConnectStandIn([{ name: 'Web', items: [{ title: 'Site', urls: ['https://site.example'], username: 'u', password: 'p' }] }]);
  // /v1/vaults on /slow never answers, on /stall stops halfway, on /big answers more than the size limit.
  misbehaving = http.createServer((req, res) => {
    if (req.url?.startsWith('/slow/')) return; // held open until the client gives up
    if (req.url?.startsWith('/stall/')) {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('[{"id":"v1",'); // then nothing more
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(Array.from({ length: 500 }, (_, i) => ({ id: `vault-${i}`, name: `a vault with a long name ${i}` }))));
  });
  await new Promise<void>((resolve) => misbehaving.listen(0, '127.0.0.1', resolve));
  misbehavingUrl = `http://127.0.0.1:${(misbehaving.address() as AddressInfo).port}`;
});
afterAll(async () => {
  misbehaving?.closeAllConnections();
  await new Promise<void>((resolve) => misbehaving?.close(() => resolve()));
  await connect?.close();
});

const createAndTest = async (client: HttpClient, connectUrl: string, name: string): Promise<Json> => {
  const created = await client.post('/org/credential_providers', { name, provider_type: 'onepassword', token: connect.token, connect_url: connectUrl });
  expect(created.status, created.text).toBe(200);
  const res = await client.post(`/org/credential_providers/${created.body.id}/test`);
  expect(res.status, res.text).toBe(200);
  return res.body as Json;
};

describe('with BROWSERPLANE_BLOCK_PRIVATE_NETWORKS', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp({ egress: { blockPrivateNetworks: true, allowedNetworks: '10.99.0.0/16' } });
  });
  afterAll(async () => app?.close());

  it('refuses a Connect server on loopback, by address or by name, without contacting it', async () => {
    const before = connect.requests.length;
    for (const [name, url] of [
      ['by-address', connect.url],
      ['by-name', connect.url.replace('127.0.0.1', 'localhost')],
    ]) {
      const result = await createAndTest(app.tenant.http, url!, name!);
      expect(result).toMatchObject({ success: false, vaults: [] });
      expect(result.error).toContain('BROWSERPLANE_BLOCK_PRIVATE_NETWORKS');
    }
    expect(connect.requests.length).toBe(before);
  });
});

describe('with the block on and the Connect server’s address allowed', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp({ egress: { blockPrivateNetworks: true, allowedNetworks: '127.0.0.1,::1' } });
  });
  afterAll(async () => app?.close());

  it('reaches it, by address and by a name pinned to the checked address', async () => {
    for (const [name, url] of [
      ['allowed-address', connect.url],
      ['allowed-name', connect.url.replace('127.0.0.1', 'localhost')],
    ]) {
      expect(await createAndTest(app.tenant.http, url!, name!)).toMatchObject({ success: true, vaults: [{ name: 'Web' }] });
    }
  });
});

describe('timeout, answer size and providers per org', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp({
      settings: {
        maxBodyBytes: 64 * 1024,
        orgMaxConcurrentSessions: 50,
        browserLaunchTimeoutMs: 30_000,
        credentialProviders: { timeoutMs: 500, maxResponseBytes: 4096, maxPerOrg: 3 },
      },
    });
  });
  afterAll(async () => app?.close());

  it('gives up on a server that does not answer within the timeout', async () => {
    const result = await createAndTest(app.tenant.http, `${misbehavingUrl}/slow`, 'slow');
    expect(result).toMatchObject({ success: false, vaults: [], error: expect.stringContaining('timed out') });
  });

  it('gives up on an answer that stalls halfway, as on one that never starts', async () => {
    const result = await createAndTest(app.tenant.http, `${misbehavingUrl}/stall`, 'stall');
    expect(result).toMatchObject({ success: false, vaults: [], error: expect.stringContaining('broke off its answer: timed out') });
  });

  it('stops reading an answer past the size limit', async () => {
    const result = await createAndTest(app.tenant.http, `${misbehavingUrl}/big`, 'big');
    expect(result).toMatchObject({ success: false, vaults: [], error: expect.stringContaining('more than 4096 bytes') });
  });

  it('refuses a provider past the per-org cap with 409 credential_provider_limit, another org unaffected', async () => {
    const capped = await app.newTenant('capped-org');
    const create = (client: HttpClient, name: string) =>
      client.post('/org/credential_providers', { name, provider_type: 'onepassword', token: 't', connect_url: connect.url });
    for (const name of ['one', 'two', 'three']) expect((await create(capped.http, name)).status).toBe(200);
    const over = await create(capped.http, 'four');
    expect(over.status, over.text).toBe(409);
    expect(over.body.code).toBe('credential_provider_limit');
    const { rows } = await app.database.db.query<{ n: number }>('SELECT count(*)::int AS n FROM credential_providers WHERE org_id = $1', [capped.orgId]);
    expect(rows[0]!.n).toBe(3);
    const other = await app.newTenant('uncapped-org');
    expect((await create(other.http, 'four')).status).toBe(200);
  });
});
