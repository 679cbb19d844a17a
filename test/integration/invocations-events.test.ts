import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AppDeps } from '../../api/src/app-deps.js';
import { buildApp } from '../../api/src/app.js';
import { createAppServices } from '../../api/src/app-services.js';
import { createPgEventHub, type EventHub } from '../../api/src/events/hub.js';
import { errorMiddleware } from '../../api/src/http/error-middleware.js';
import { mountRoutes } from '../../api/src/http/router.js';
import { invocationRoutes } from '../../api/src/modules/invocations/routes.js';
import { errorFields, HttpClient } from '../support/http.js';
import { openSse, type SseFrame } from '../support/sse.js';
import { startTestApp, type TestApp } from '../support/test-app.js';

/**
 * The invocation event stream. Replica A is the ordinary test app; replica B is a
 * second app on the same database with its own LISTEN connection; replica C mounts the
 * invocation routes with a short heartbeat, a counting event hub and its own stream
 * registry, to observe subscriptions, heartbeats and shutdown.
 */

let app: TestApp;
const servers: Server[] = [];
const hubs: EventHub[] = [];
let replicaB: HttpClient;
let replicaC: { url: string; shutdown: AbortController; hub: CountingHub };

const listen = async (handler: express.Express): Promise<string> => {
  const server = await new Promise<Server>((resolve) => {
    const s = handler.listen(0, '127.0.0.1', () => resolve(s));
  });
  servers.push(server);
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
};

beforeAll(async () => {
  app = await startTestApp();
  const hubB = createPgEventHub(app.database.url, app.database.db, app.deps.log);
  hubs.push(hubB);
  const depsB = { ...app.deps, events: hubB };
  replicaB = new HttpClient(await listen(buildApp(depsB, createAppServices(depsB)).app), app.tenant.adminKey);

  const hubC = countingHub(createPgEventHub(app.database.url, app.database.db, app.deps.log));
  hubs.push(hubC);
  const shutdown = new AbortController();
  const depsC: AppDeps = { ...app.deps, events: hubC, shutdown: shutdown.signal, settings: { ...app.deps.settings, sseHeartbeatMs: 50 } };
  const c = express();
  c.use(express.json());
  mountRoutes(c, invocationRoutes(depsC), depsC);
  c.use(errorMiddleware(app.deps.log));
  replicaC = { url: await listen(c), shutdown, hub: hubC };
});
afterAll(async () => {
  for (const server of servers) {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
  for (const hub of hubs) await hub.close();
  await app?.close();
});

interface CountingHub extends EventHub {
  /** Subscriptions not yet undone. */
  active(): number;
  /** Calls every subscriber's reconnect handler, as the hub does after a lost connection. */
  simulateReconnect(): void;
}

function countingHub(inner: EventHub): CountingHub {
  const reconnects = new Set<() => void>();
  let active = 0;
  return {
    publish: (channel, payload, db) => inner.publish(channel, payload, db),
    async subscribe(channel, handler, onReconnect) {
      const undo = await inner.subscribe(channel, handler, onReconnect);
      active++;
      if (onReconnect) reconnects.add(onReconnect);
      return async () => {
        active--;
        if (onReconnect) reconnects.delete(onReconnect);
        await undo();
      };
    },
    close: () => inner.close(),
    active: () => active,
    simulateReconnect: () => reconnects.forEach((r) => r()),
  };
}

type Frame = SseFrame<{ event: string; [k: string]: any }>;

const openStream = (baseUrl: string, path: string, key = app.tenant.adminKey) => openSse<Frame['data']>(baseUrl + path, { key });

const within = async <T>(promise: Promise<T>, ms = 5000): Promise<T> =>
  Promise.race([promise, new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`not within ${ms} ms`)), ms))]);

const createInvocation = async (http = app.tenant.http) => {
  const res = await http.post('/invocations', { app_name: 'app', action_name: 'act', version: 'v1', async: true });
  expect(res.status).toBe(202);
  return res.body.id as string;
};
const states = (frames: Frame[]) =>
  frames.filter((f) => f.data.event === 'invocation_state').map((f) => f.data.invocation.status as string);

describe('GET /invocations/{id}/events', () => {
  it('sends the current state, then the change made through another replica, then ends', async () => {
    const id = await createInvocation();
    const stream = await openStream(app.url, `/invocations/${id}/events`);
    expect(stream.res.status).toBe(200);
    expect(stream.res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const first = await stream.frame(1);
    expect(first).toEqual({
      name: 'invocation_state',
      data: {
        event: 'invocation_state',
        invocation: (await app.tenant.http.get(`/invocations/${id}`)).body,
        timestamp: expect.any(String),
      },
    });

    const patched = await replicaB.patch(`/invocations/${id}`, { status: 'succeeded', output: '{"n":1}' });
    expect(patched.status).toBe(200);

    const second = await stream.frame(2);
    expect(second.data).toEqual({ event: 'invocation_state', invocation: patched.body, timestamp: expect.any(String) });
    await within(stream.ended);
    expect(stream.frames).toHaveLength(2);
  });

  it('follows queued → running → failed and ends at the terminal state', async () => {
    const id = await createInvocation();
    const stream = await openStream(app.url, `/invocations/${id}/events`);
    await stream.frame(1);
    await replicaB.patch(`/invocations/${id}`, { status: 'running' });
    await stream.frame(2);
    await app.tenant.http.patch(`/invocations/${id}`, { status: 'failed' });
    await within(stream.ended);
    expect(states(stream.frames)).toEqual(['queued', 'running', 'failed']);
  });

  it('sends one frame for an invocation that already finished, then closes', async () => {
    const id = await createInvocation();
    await app.tenant.http.patch(`/invocations/${id}`, { status: 'succeeded', output: '"done"' });
    const stream = await openStream(app.url, `/invocations/${id}/events?since=5m`);
    await within(stream.ended);
    expect(stream.frames).toHaveLength(1);
    expect(stream.frames[0]!.data.invocation).toMatchObject({ id, status: 'succeeded', output: '"done"' });
  });

  it('sends JSON heartbeats at the configured interval', async () => {
    const id = await createInvocation();
    const stream = await openStream(replicaC.url, `/invocations/${id}/events`);
    await stream.frame(3);
    stream.abort();
    expect(stream.frames[0]!.data.event).toBe('invocation_state');
    for (const beat of stream.frames.slice(1)) {
      expect(beat).toEqual({ name: 'sse_heartbeat', data: { event: 'sse_heartbeat', timestamp: expect.any(String) } });
    }
  });

  it('answers 404 before streaming for an unknown id, another org and another project', async () => {
    const id = await createInvocation();
    const other = await app.newTenant('other');
    const project = await app.tenant.http.post('/org/projects', { name: 'events-elsewhere' });
    const key = await app.tenant.http.post('/org/api_keys', { name: 'elsewhere', project_id: project.body.id });
    for (const [path, apiKey] of [
      ['/invocations/inv_unknown/events', app.tenant.adminKey],
      [`/invocations/${id}/events`, other.adminKey],
      [`/invocations/${id}/events`, key.body.key as string],
    ] as const) {
      const res = await fetch(app.url + path, { headers: { authorization: `Bearer ${apiKey}`, accept: 'text/event-stream' } });
      expect(res.status).toBe(404);
      expect(res.headers.get('content-type')).toMatch(/^application\/json/);
      expect(((await res.json()) as { code: string }).code).toBe('not_found');
    }
  });

  it('refuses a malformed since with 400', async () => {
    const id = await createInvocation();
    const res = await app.tenant.http.get(`/invocations/${id}/events?since=later`);
    expect(res.status).toBe(400);
    expect(errorFields(res)).toEqual(['query.since']);
  });

  it('unsubscribes when the client disconnects', async () => {
    const id = await createInvocation();
    const before = replicaC.hub.active();
    const stream = await openStream(replicaC.url, `/invocations/${id}/events`);
    await stream.frame(1);
    expect(replicaC.hub.active()).toBe(before + 1);
    stream.abort();
    await expect.poll(() => replicaC.hub.active(), { timeout: 5000, interval: 20 }).toBe(before);
  });

  it('unsubscribes when the server ends the stream at the terminal state', async () => {
    const id = await createInvocation();
    const before = replicaC.hub.active();
    const stream = await openStream(replicaC.url, `/invocations/${id}/events`);
    await stream.frame(1);
    await app.tenant.http.patch(`/invocations/${id}`, { status: 'succeeded' });
    await within(stream.ended);
    await expect.poll(() => replicaC.hub.active(), { timeout: 5000, interval: 20 }).toBe(before);
  });

  it('re-reads the invocation when the listener reconnects, catching changes it was not told about', async () => {
    const id = await createInvocation();
    const stream = await openStream(replicaC.url, `/invocations/${id}/events`);
    await stream.frame(1);
    // A change whose notification was lost: written without NOTIFY.
    await app.database.db.query(`UPDATE invocations SET status = 'running' WHERE id = $1`, [id]);
    replicaC.hub.simulateReconnect();
    await expect.poll(() => states(stream.frames).includes('running'), { timeout: 5000, interval: 20 }).toBe(true);
    stream.abort();
    expect(states(stream.frames)).toEqual(['queued', 'running']);
  });

  it('ends every open stream with an error frame when shutdown begins', async () => {
    const ids = [await createInvocation(), await createInvocation()];
    const streams = await Promise.all(ids.map((id) => openStream(replicaC.url, `/invocations/${id}/events`)));
    await Promise.all(streams.map((s) => s.frame(1)));
    const before = replicaC.hub.active();
    replicaC.shutdown.abort();
    for (const stream of streams) {
      await within(stream.ended);
      expect(stream.frames.at(-1)!.data).toMatchObject({ event: 'error', error: { code: 'server_shutting_down' } });
    }
    await expect.poll(() => replicaC.hub.active(), { timeout: 5000, interval: 20 }).toBe(before - streams.length);
  });
});
