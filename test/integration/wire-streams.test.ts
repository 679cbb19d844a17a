import type { AddressInfo } from 'node:net';
import Kernel from '@onkernel/sdk';
import express from 'express';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../api/src/clock.js';
import { errorMiddleware } from '../../api/src/http/error-middleware.js';
import { mountRoutes } from '../../api/src/http/router.js';
import { statusRoutes } from '../../api/src/modules/health/status-routes.js';
import type { HttpClient } from '../support/http.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { createPool } from './browser-pools.fixtures.js';
import { newProject } from './browsers.fixtures.js';
import { fsPut, newFsSession, writeFile } from './browser-fs.fixtures.js';

/**
 * What older and newer clients need on the wire (docs/wire-compatibility.md): every event
 * stream starts with a real event (the Go SDK's decoder ends its stream on a block without
 * data, such as a comment), a timed-out acquire is a 204 with a Content-Type, and
 * kernel status finds /status and /health. Real Postgres and a real headless Chromium for
 * the fs watch; the outage case mounts /status on a real pg pool that has been ended.
 */

let app: TestApp;
let project: HttpClient;

beforeAll(async () => {
  // A short heartbeat, so a stream with nothing to report still sends its first event soon.
  app = await startTestApp({ clock: systemClock, settings: { sseHeartbeatMs: 200 } });
  project = (await newProject(app.tenant.http)).http;
});
afterAll(async () => {
  await app?.close();
});

const auth = (client: HttpClient) => ({ ...client.extraHeaders, authorization: `Bearer ${client.key}` });

/** The body's bytes up to the end of its first event block, then the stream is dropped. */
async function firstBlock(res: Response, meanwhile?: () => Promise<unknown>): Promise<string> {
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let text = '';
  const reading = (async () => {
    while (!text.includes('\n\n')) {
      const { value, done } = await reader.read();
      if (done) break;
      text += decoder.decode(value, { stream: true });
    }
  })();
  await meanwhile?.();
  await reading;
  await reader.cancel();
  return text.slice(0, text.indexOf('\n\n') + 2);
}

/**
 * The first block as the Go SDK (0.28 and older) decodes it: fields up to the first blank
 * line, comments skipped, and the block dispatched as one event whose data must be JSON.
 */
function expectGoDecodable(block: string): void {
  expect(block.startsWith(':'), `starts with a comment: ${JSON.stringify(block)}`).toBe(false);
  const lines = block.split('\n').filter((line) => line !== '');
  expect(lines.filter((line) => line.startsWith(':'))).toEqual([]);
  const data = lines.filter((line) => line.startsWith('data:')).map((line) => line.slice(5).trimStart());
  expect(data.length, `no data line: ${JSON.stringify(block)}`).toBeGreaterThan(0);
  expect(() => JSON.parse(data.join('\n')) as unknown).not.toThrow();
}

describe('event streams start with a real event', () => {
  it('GET /invocations/{id}/events: the invocation state first', async () => {
    const created = await project.post('/invocations', { app_name: 'app', action_name: 'act', version: 'v1', async: true });
    expect(created.status, created.text).toBe(202);
    const res = await fetch(`${app.url}/invocations/${created.body.id}/events`, { headers: auth(project) });
    const block = await firstBlock(res);
    expect(block).toMatch(/^event: ?invocation_state\n/);
    expectGoDecodable(block);
  });

  it('GET /auth/connections/{id}/events: a heartbeat event first when nothing happens', async () => {
    const created = await project.post('/auth/connections', { domain: 'example.com', profile_name: `wire-${Date.now()}` });
    expect(created.status, created.text).toBe(200);
    const res = await fetch(`${app.url}/auth/connections/${created.body.id}/events`, { headers: auth(project) });
    const block = await firstBlock(res);
    expect(block).toMatch(/^event: ?sse_heartbeat\n/);
    expectGoDecodable(block);
  });

  it('GET /browsers/{id}/fs/watch/{watch_id}/events: the head at once, then the first change as the first bytes', async () => {
    const fs = await newFsSession(app, project);
    expect((await fsPut(fs, 'create_directory', { path: '/wire-watched' })).status).toBe(204);
    const started = await project.post(`/browsers/${fs.id}/fs/watch`, { path: '/wire-watched', recursive: true });
    expect(started.status, started.text).toBe(200);
    // fetch resolves on the head: the stream is open before anything has happened.
    const res = await fetch(`${app.url}/browsers/${fs.id}/fs/watch/${started.body.watch_id}/events`, { headers: auth(project) });
    const block = await firstBlock(res, () => writeFile(fs, '/wire-watched/new.txt', 'n'));
    expect(block).toMatch(/^data: \{/);
    expectGoDecodable(block);
    expect(JSON.parse(block.slice('data: '.length))).toMatchObject({ path: '/wire-watched/new.txt' });
  });

  it('GET /browsers/{id}/process/{process_id}/stdout/stream: the head at once, then the first output as the first bytes', async () => {
    const fs = await newFsSession(app, project);
    // Quiet for a while, so the head must come before any output does.
    const spawned = await project.post(`/browsers/${fs.id}/process/spawn`, { command: 'sh', args: ['-c', 'read line; echo "got $line"'] });
    expect(spawned.status, spawned.text).toBe(200);
    const res = await fetch(`${app.url}/browsers/${fs.id}/process/${spawned.body.process_id}/stdout/stream`, { headers: auth(project) });
    const stdin = () => project.post(`/browsers/${fs.id}/process/${spawned.body.process_id}/stdin`, { data_b64: Buffer.from('go\n').toString('base64') });
    const block = await firstBlock(res, stdin);
    expect(block).toMatch(/^data: \{/);
    expectGoDecodable(block);
    expect(JSON.parse(block.slice('data: '.length))).toMatchObject({ stream: 'stdout', data_b64: Buffer.from('got go\n').toString('base64') });
  });
});

describe('a timed-out acquire', () => {
  it('answers 204 with Content-Type application/json and no body, which the TS SDK reads as null', async () => {
    // The pools' fill is not started in this app: the pool stays empty.
    const pool = await createPool(project, { size: 1, headless: true });
    const raw = await fetch(`${app.url}/browser_pools/${pool.id}/acquire`, {
      method: 'POST',
      headers: { ...auth(project), 'content-type': 'application/json' },
      body: JSON.stringify({ acquire_timeout_seconds: 0 }),
    });
    expect(raw.status).toBe(204);
    expect(raw.headers.get('content-type')).toBe('application/json');
    expect(raw.headers.get('content-length')).toBeNull();
    expect(await raw.text()).toBe('');

    const kernel = new Kernel({ apiKey: project.key, baseURL: app.url, maxRetries: 0, defaultHeaders: project.extraHeaders });
    expect(await kernel.browserPools.acquire(pool.id, { acquire_timeout_seconds: 0 })).toBeNull();
  });
});

describe('GET /status and GET /health (kernel status)', () => {
  it('answers /status without a key in the shape the CLI prints', async () => {
    const res = await fetch(`${app.url}/status`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(await res.json()).toEqual({
      status: 'operational',
      groups: [
        {
          name: 'Browserplane',
          status: 'operational',
          components: [
            { name: 'API', status: 'operational' },
            { name: 'Database', status: 'operational' },
          ],
        },
      ],
    });
  });

  it('still answers 200 when Postgres does not answer, with the database as full_outage (and the API as maintenance while draining)', async () => {
    const ended = new pg.Pool({ connectionString: app.database.url });
    await ended.end();
    const deps = { ...app.deps, db: ended };
    const alone = express();
    mountRoutes(alone, statusRoutes(deps, { draining: true }), deps);
    alone.use(errorMiddleware(app.deps.log));
    const server = await new Promise<ReturnType<typeof alone.listen>>((resolve) => {
      const listening = alone.listen(0, '127.0.0.1', () => resolve(listening));
    });
    try {
      const res = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/status`);
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({
        status: 'full_outage',
        groups: [
          {
            name: 'Browserplane',
            status: 'full_outage',
            components: [
              { name: 'API', status: 'maintenance' },
              { name: 'Database', status: 'full_outage' },
            ],
          },
        ],
      });
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it('answers /health without a key', async () => {
    const res = await fetch(`${app.url}/health`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ status: 'ok' });
  });

  it('refuses other methods on them with 405 and Allow', async () => {
    for (const path of ['/status', '/health']) {
      const res = await fetch(`${app.url}${path}`, { method: 'POST' });
      expect(res.status).toBe(405);
      expect(res.headers.get('allow')).toBe('GET, HEAD');
      expect(await res.json()).toMatchObject({ code: 'method_not_allowed' });
    }
  });
});
