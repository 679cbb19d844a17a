import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AppDeps } from '../../api/src/app-deps.js';
import { buildApp } from '../../api/src/app.js';
import { createAppServices } from '../../api/src/app-services.js';
import type { FixedClock } from '../../api/src/clock.js';
import { createPgEventHub, type EventHub } from '../../api/src/events/hub.js';
import { AuthCache } from '../../api/src/modules/api-keys/auth-cache.js';
import { eventually } from '../support/eventually.js';
import { HttpClient } from '../support/http.js';
import { startTestApp, type TestApp } from '../support/test-app.js';

/**
 * Cached key verification (auth-cache.ts). Replica A is the test app; replica B a second
 * app on the same database with its own LISTEN connection and its own cache. Writes made
 * with SQL stand for another replica's (or an operator's): this process does not see them
 * happen, so only the database's notification can tell the caches.
 */

let app: TestApp;
let server: Server;
let hubB: EventHub;
let replicaB: (key: string) => HttpClient;
let cacheB: AuthCache;

beforeAll(async () => {
  app = await startTestApp();
  hubB = createPgEventHub(app.database.url, app.database.db, app.deps.log);
  cacheB = new AuthCache(hubB, app.clock);
  const depsB: AppDeps = { ...app.deps, events: hubB, authCache: cacheB };
  server = await new Promise<Server>((resolve) => {
    const s = buildApp(depsB, createAppServices(depsB)).app.listen(0, '127.0.0.1', () => resolve(s));
  });
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  replicaB = (key) => new HttpClient(url, key);
});
afterAll(async () => {
  server?.closeAllConnections();
  await new Promise((resolve) => server?.close(resolve));
  await hubB?.close();
  await app?.close();
});

async function newKey(body: Record<string, unknown> = {}): Promise<{ id: string; key: string }> {
  const res = await app.tenant.http.post('/org/api_keys', { name: 'cached', ...body });
  expect(res.status).toBe(200);
  return res.body as { id: string; key: string };
}

/** Requests with the key on both replicas until both caches hold it (LISTEN answers on the first request). */
async function cachedOnBoth(key: string, path = '/org/projects'): Promise<void> {
  await eventually(
    async () => {
      expect((await app.client(key).get(path)).status).toBe(200);
      expect((await replicaB(key).get(path)).status).toBe(200);
      return app.deps.authCache!.size > 0 && cacheB.size > 0;
    },
    { timeoutMs: 5000, intervalMs: 20, what: 'both replicas to cache the key' },
  );
}

const stopsWorkingOn = (client: HttpClient, path = '/org/projects') =>
  eventually(async () => (await client.get(path)).status, {
    accept: (status) => status === 401,
    timeoutMs: 2000,
    intervalMs: 10,
    what: 'the key to be refused',
  });

describe('cached API key verification', () => {
  it('refuses a key deleted through the API on the very next request', async () => {
    const key = await newKey();
    await cachedOnBoth(key.key);
    expect((await app.tenant.http.delete(`/org/api_keys/${key.id}`)).status).toBe(204);
    const next = await app.client(key.key).get('/org/projects');
    expect(next.status).toBe(401);
    expect(next.body.message).toBe('The API key is not valid');
    expect((await replicaB(key.key).get('/org/projects')).status).toBe(401);
  });

  it('refuses, on every replica, a key another replica deleted, once the delete commits', async () => {
    const key = await newKey();
    await cachedOnBoth(key.key);
    await app.database.db.query('UPDATE api_keys SET deleted_at = now() WHERE id = $1', [key.id]);
    await stopsWorkingOn(app.client(key.key));
    await stopsWorkingOn(replicaB(key.key));
  });

  it('refuses a key another replica expired early, and a key whose expiry passes while it is cached', async () => {
    const early = await newKey();
    await cachedOnBoth(early.key);
    // The app's clock stands still: a second before its now.
    await app.database.db.query('UPDATE api_keys SET expires_at = $2 WHERE id = $1', [early.id, new Date(app.clock.now().getTime() - 1000)]);
    await stopsWorkingOn(app.client(early.key));
    await stopsWorkingOn(replicaB(early.key));

    const clock = app.clock as FixedClock;
    const lapsing = await newKey({ expires_at: new Date(clock.now().getTime() + 60_000).toISOString() });
    await cachedOnBoth(lapsing.key);
    clock.advance(60_000);
    try {
      const res = await app.client(lapsing.key).get('/org/projects');
      expect(res.status).toBe(401);
      expect(res.body.message).toBe('The API key has expired');
    } finally {
      clock.advance(-60_000);
    }
  });

  it('refuses a project key once another replica deletes its project', async () => {
    const project = (await app.tenant.http.post('/org/projects', { name: 'cached-project' })).body as { id: string };
    const key = await newKey({ project_id: project.id });
    // A project-scoped route: the cache holds the key with its project.
    await cachedOnBoth(key.key, '/browsers');
    await app.database.db.query('UPDATE projects SET deleted_at = now() WHERE id = $1', [project.id]);
    await stopsWorkingOn(app.client(key.key), '/browsers');
    await stopsWorkingOn(replicaB(key.key), '/browsers');
  });
});
