import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type Kernel from '@onkernel/sdk';
import { BadRequestError, KernelError, NotFoundError } from '@onkernel/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recordingFetch, rejection } from './support/sdk.js';
import { cleanupServices, startService, type RunningService } from '../support/service.js';

/**
 * browsers.curl through the official SDK, against the built service with real Chromium and
 * a local server that records what arrived. Also CONTRACT §12.7: the browser JSON never
 * gives the SDK a base_url with a jwt, so its curl goes to the API host, and
 * browsers.fetch() (which needs that route) says so.
 */

let service: RunningService;
let target: Server;
let base: string;
const arrivals: { method: string; url: string; headers: IncomingMessage['headers']; body: string }[] = [];

beforeAll(async () => {
  target = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      arrivals.push({ method: request.method ?? '', url: request.url ?? '', headers: request.headers, body: Buffer.concat(chunks).toString('utf8') });
      response.setHeader('set-cookie', ['one=1; Path=/', 'two=2; Path=/']);
      response.writeHead(200, { 'content-type': 'application/json' });
      response.end(JSON.stringify({ seen: request.method }));
    });
  });
  await new Promise<void>((resolve) => target.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(target.address() as AddressInfo).port}`;
  service = await startService();
});
afterAll(async () => {
  await cleanupServices();
  target?.closeAllConnections();
  await new Promise((resolve) => target?.close(resolve));
});

describe('browsers.curl through the SDK', () => {
  it('makes the request from the browser, and the SDK sends it to the API host, never to a base_url', async () => {
    const recorder = recordingFetch();
    const client: Kernel = service.client(undefined, { fetch: recorder.fetch });
    const session = await client.browsers.create({ headless: true, timeout_seconds: 120 });
    const id = session.session_id;
    try {
      // What fills the SDK's route cache: create, retrieve and list responses.
      await client.browsers.retrieve(id);
      await client.browsers.list();
      expect(client.browserRouteCache.get(id)).toBeUndefined();
      const answer = await client.browsers.curl(id, {
        url: `${base}/sdk?x=1`,
        method: 'POST',
        headers: { 'X-From': 'sdk' },
        body: '{"hello":"browser"}',
      });
      expect(answer.status).toBe(200);
      expect(JSON.parse(answer.body)).toEqual({ seen: 'POST' });
      expect(answer.headers['set-cookie']).toEqual(['one=1; Path=/', 'two=2; Path=/']);
      expect(answer.duration_ms).toBeGreaterThanOrEqual(0);
      const arrival = arrivals.at(-1)!;
      expect(arrival).toMatchObject({ method: 'POST', url: '/sdk?x=1', body: '{"hello":"browser"}' });
      expect(arrival.headers['x-from']).toBe('sdk');
      expect(arrival.headers['user-agent']).toMatch(/Chrome\//);

      const curlCalls = recorder.calls.filter((call) => call.url.pathname.endsWith('/curl'));
      expect(curlCalls.map((call) => `${call.url.origin}${call.url.pathname}`)).toEqual([`${service.url}/browsers/${id}/curl`]);
      expect(curlCalls[0]!.url.searchParams.has('jwt')).toBe(false);

      const fetched = await rejection(client.browsers.fetch(id, `${base}/raw`), KernelError);
      expect(fetched.message).toContain('route cache');
    } finally {
      await client.browsers.deleteByID(id);
    }
  });

  it('sends the browser cookies: one set by an earlier answer goes with the next request', async () => {
    const client = service.client();
    const session = await client.browsers.create({ headless: true, timeout_seconds: 120 });
    try {
      await client.browsers.curl(session.session_id, { url: `${base}/first` });
      await client.browsers.curl(session.session_id, { url: `${base}/second` });
      expect(arrivals.at(-1)!.headers.cookie).toBe('one=1; two=2');
    } finally {
      await client.browsers.deleteByID(session.session_id);
    }
  });

  it('refuses a non-http URL with 400 and an unknown session with 404', async () => {
    const client = service.client();
    const session = await client.browsers.create({ headless: true, timeout_seconds: 120 });
    try {
      const bad = await rejection(client.browsers.curl(session.session_id, { url: 'file:///etc/passwd' }), BadRequestError);
      expect(bad.message).toContain('http or https');
    } finally {
      await client.browsers.deleteByID(session.session_id);
    }
    await rejection(client.browsers.curl('no-such-session', { url: `${base}/x` }), NotFoundError);
  });
});
