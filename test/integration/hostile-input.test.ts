import { mkdtemp, readdir, rm, stat, writeFile as writeHostFile } from 'node:fs/promises';
import type { Server } from 'node:http';
import { connect, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../api/src/app.js';
import { MAX_JSON_DEPTH } from '../../api/src/http/input-checks.js';
import { createHttpServer, SERVER_TIMEOUTS } from '../../api/src/service.js';
import { systemClock } from '../../api/src/clock.js';
import { errorFields, type HttpResponse } from '../support/http.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { fsGet, fsPut, newFsSession, rawRequest, readFile, writeFile, type FsSession } from './browser-fs.fixtures.js';
import { FakeAgent, FakeRuntime, newProject, useRuntime } from './browsers.fixtures.js';

/**
 * Hostile clients at the HTTP edge (issue 8, "bad input"): each request below must get
 * a clear 4xx in the one error shape and change nothing in the database, and the server
 * must keep serving everyone else. Path escapes that need a real browser filesystem are
 * at the end; the plain ".." and link cases are in browser-fs-escapes.test.ts.
 */

const MAX_BODY = 2 * 1024 * 1024;

function expectError(res: HttpResponse, status: number, code: string): void {
  expect(res.status, res.text.slice(0, 500)).toBe(status);
  expect(res.headers.get('content-type')).toMatch(/^application\/json/);
  expect(res.body).toMatchObject({ code, message: expect.any(String), details: expect.any(Array) });
  // An error never echoes a hostile payload back in full.
  expect(res.text.length).toBeLessThan(4096);
}

/**
 * Every row of every table, as text: equal snapshots mean the request wrote nothing but
 * the audit log's record of its refusal (docs/audit-logs.md), which is left out.
 */
async function snapshot(app: TestApp): Promise<Map<string, string>> {
  const { rows: tables } = await app.database.db.query<{ name: string }>(
    `SELECT table_name AS name FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE' AND table_name <> 'audit_logs' ORDER BY 1`,
  );
  const out = new Map<string, string>();
  for (const { name } of tables) {
    const { rows } = await app.database.db.query<{ digest: string | null; n: string }>(
      `SELECT md5(string_agg(t::text, '|' ORDER BY t::text)) AS digest, count(*) AS n FROM "${name}" t`,
    );
    out.set(name, `${rows[0]!.n}:${rows[0]!.digest ?? ''}`);
  }
  return out;
}

async function expectNothingWritten(app: TestApp, attempt: () => Promise<void>): Promise<void> {
  const before = await snapshot(app);
  await attempt();
  expect(await snapshot(app)).toEqual(before);
}

interface RawAnswer {
  /** Everything the server sent. */
  text: string;
  status: number | undefined;
  /** Whether the server closed the connection before `waitMs` ran out. */
  closed: boolean;
  elapsedMs: number;
}

/**
 * A raw TCP exchange, for what fetch refuses to send (oversized headers, trickled bytes,
 * bodies that never end). `drive` writes; the answer is what came back until the server
 * closed or `waitMs` passed.
 */
function exchange(url: string, drive: (socket: Socket, closed: () => boolean) => Promise<void> | void, waitMs: number): Promise<RawAnswer> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const started = Date.now();
    const socket = connect(Number(port), hostname);
    const chunks: Buffer[] = [];
    let done = false;
    const finish = (closed: boolean) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      const text = Buffer.concat(chunks).toString('latin1');
      const status = /^HTTP\/1\.1 (\d{3})/.exec(text)?.[1];
      resolve({ text, status: status ? Number(status) : undefined, closed, elapsedMs: Date.now() - started });
    };
    const timer = setTimeout(() => finish(false), waitMs);
    socket.on('data', (chunk) => chunks.push(chunk));
    socket.on('close', () => finish(true));
    socket.on('error', () => finish(true));
    socket.once('connect', () => {
      void Promise.resolve(drive(socket, () => done)).catch(() => undefined);
    });
  });
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Writes `text` one byte every `everyMs` until done or the server closes. */
async function trickle(socket: Socket, closed: () => boolean, text: string, everyMs: number): Promise<void> {
  for (const byte of text) {
    if (closed() || socket.destroyed) return;
    socket.write(byte);
    await sleep(everyMs);
  }
}

/** GET /healthz, timed: the service must answer others while under attack. */
async function timedHealth(url: string): Promise<{ status: number; ms: number }> {
  const started = Date.now();
  const res = await fetch(`${url}/healthz`);
  await res.text();
  return { status: res.status, ms: Date.now() - started };
}

describe('hostile input at the HTTP edge', () => {
  let app: TestApp;
  let agent: FakeAgent;
  let auth: string;

  beforeAll(async () => {
    app = await startTestApp({ clock: systemClock, settings: { maxBodyBytes: MAX_BODY } });
    // Browser routes run against a stand-in: a request that wrongly got through would
    // show up as a launch, never as a real Chromium.
    agent = new FakeAgent();
    useRuntime(app, new FakeRuntime(await agent.listen()));
    auth = `Bearer ${app.tenant.adminKey}`;
  });
  afterAll(async () => {
    await app?.close();
    await agent?.close();
  });

  describe('oversized bodies', () => {
    it('answers 413 payload_too_large to a body over the limit sent with Content-Length', async () => {
      await expectNothingWritten(app, async () => {
        const res = await app.tenant.http.post('/org/projects', { name: 'big', pad: 'x'.repeat(MAX_BODY) });
        expectError(res, 413, 'payload_too_large');
        expect(res.body.message).toContain(String(MAX_BODY));
      });
    });

    it('answers 413 to a chunked body with no length that never ends, and closes the connection', async () => {
      await expectNothingWritten(app, async () => {
        const answer = await exchange(
          app.url,
          async (socket, closed) => {
            socket.write(
              `POST /org/projects HTTP/1.1\r\nHost: x\r\nAuthorization: ${auth}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n`,
            );
            const chunk = Buffer.alloc(64 * 1024, 0x20);
            const framed = Buffer.concat([Buffer.from(`${chunk.length.toString(16)}\r\n`), chunk, Buffer.from('\r\n')]);
            socket.write('f\r\n{"name":"chunk"\r\n');
            // Keeps sending, as a hostile client would, until the server hangs up.
            while (!closed() && !socket.destroyed) {
              if (!socket.write(framed)) await new Promise((resolve) => socket.once('drain', resolve).once('close', resolve));
            }
          },
          15_000,
        );
        expect(answer.status, answer.text.slice(0, 300)).toBe(413);
        expect(answer.text).toContain('"code":"payload_too_large"');
        expect(answer.closed).toBe(true);
        expect(answer.elapsedMs).toBeLessThan(5_000);
      });
      expect((await timedHealth(app.url)).status).toBe(200);
    });

    it('answers 413 at once to a huge declared Content-Length, without waiting for the body', async () => {
      await expectNothingWritten(app, async () => {
        const answer = await exchange(
          app.url,
          (socket) =>
            void socket.write(
              `POST /org/projects HTTP/1.1\r\nHost: x\r\nAuthorization: ${auth}\r\nContent-Type: application/json\r\nContent-Length: 1000000000000\r\n\r\n{"name":`,
            ),
          15_000,
        );
        expect(answer.status, answer.text.slice(0, 300)).toBe(413);
        expect(answer.text).toContain('"code":"payload_too_large"');
        expect(answer.closed).toBe(true);
        expect(answer.elapsedMs).toBeLessThan(5_000);
      });
    });

    it('reads a 1 MB string within the limit and refuses it by field, without echoing it', async () => {
      await expectNothingWritten(app, async () => {
        const res = await app.tenant.http.post('/org/projects', { name: 'y'.repeat(1024 * 1024) });
        expectError(res, 400, 'invalid_request');
        expect(errorFields(res)).toEqual(['body.name']);
      });
    });
  });

  describe('oversized headers and URLs', () => {
    it('answers 431 to a header over Node’s limit and goes on serving', async () => {
      const answer = await exchange(
        app.url,
        (socket) => void socket.write(`GET /org/projects HTTP/1.1\r\nHost: x\r\nAuthorization: ${auth}\r\nX-Big: ${'a'.repeat(64 * 1024)}\r\n\r\n`),
        10_000,
      );
      expect(answer.status).toBe(431);
      expect(answer.closed).toBe(true);
      expect((await timedHealth(app.url)).status).toBe(200);
    });

    it('answers 431 to a request line with a 100 KB URL', async () => {
      const answer = await exchange(
        app.url,
        (socket) => void socket.write(`GET /org/projects?name=${'a'.repeat(100 * 1024)} HTTP/1.1\r\nHost: x\r\nAuthorization: ${auth}\r\n\r\n`),
        10_000,
      );
      expect(answer.status).toBe(431);
      expect(answer.closed).toBe(true);
      expect((await timedHealth(app.url)).status).toBe(200);
    });

    it('answers 400 to header injection attempts at the parser, before any route', async () => {
      for (const header of ['X-Request-Id: a\rSet-Cookie: x=1', 'X-Request-Id: a\0b', 'Bad Name: v']) {
        const answer = await exchange(app.url, (socket) => void socket.write(`GET /healthz HTTP/1.1\r\nHost: x\r\n${header}\r\n\r\n`), 10_000);
        expect(answer.status, header).toBe(400);
        expect(answer.text).not.toMatch(/set-cookie/i);
      }
    });

    it('replaces a request id it cannot echo safely with its own', async () => {
      const res = await app.tenant.http.get('/org/limits', { 'x-request-id': 'a"b<script>' });
      expect(res.status).toBe(200);
      expect(res.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
    });
  });

  describe('malformed JSON', () => {
    it.each([
      ['NaN', '{"name":NaN}'],
      ['Infinity', '{"name":"x","n":Infinity}'],
      ['a trailing comma', '{"name":"x",}'],
      ['an unterminated string', '{"name":"x'],
      ['a second document', '{"name":"x"}{"name":"y"}'],
      ['a NUL after the document', '{"name":"x"}\u0000'],
      ['a comment', '{"name":"x" /* c */}'],
    ])('answers 400 invalid_json to %s and creates nothing', async (_case, body) => {
      await expectNothingWritten(app, async () => {
        expectError(await app.tenant.http.post('/org/projects', body), 400, 'invalid_json');
      });
    });

    it(`answers 400 invalid_json to a body nested 10,000 levels deep, in any field`, async () => {
      const deep = (depth: number) => '['.repeat(depth) + ']'.repeat(depth);
      await expectNothingWritten(app, async () => {
        for (const [route, body] of [
          ['/org/projects', `{"name":${deep(10_000)}}`],
          // Free-form JSON: without the depth limit this one reaches JSON.stringify and overflows.
          ['/browsers', `{"chrome_policy":{"ProxySettings":${deep(10_000)}}}`],
          ['/browsers', `{"chrome_policy":{"ProxySettings":${deep(MAX_JSON_DEPTH)}}}`],
          ['/org/projects', deep(10_000)],
        ] as const) {
          const res = await app.tenant.http.post(route, body);
          expectError(res, 400, 'invalid_json');
          expect(res.body.details).toEqual([expect.objectContaining({ code: 'too_deep', field: 'body' })]);
        }
      });
    });

    it('reads JSON nested up to the limit as usual', async () => {
      const nested = '{"a":'.repeat(MAX_JSON_DEPTH - 2) + '1' + '}'.repeat(MAX_JSON_DEPTH - 2);
      const res = await app.tenant.http.post('/browsers', `{"chrome_policy":{"ProxySettings":${nested}},"bogus":1}`);
      // Past the depth check, ordinary validation answers (the unknown field).
      expectError(res, 400, 'invalid_request');
      expect(errorFields(res)).toContain('body');
    });

    it('accepts a UTF-8 byte order mark before the JSON (RFC 8259 §8.1 allows ignoring it)', async () => {
      const res = await app.tenant.http.post('/org/projects', '\uFEFF{"name":"with-bom"}');
      expect(res.status, res.text).toBe(200);
      expect(res.body.name).toBe('with-bom');
    });

    it('keeps the last of duplicate keys, as JSON.parse does, and validates that one', async () => {
      await expectNothingWritten(app, async () => {
        const res = await app.tenant.http.post('/org/projects', '{"name":"fine","name":"bad\\r\\nname"}');
        expectError(res, 400, 'invalid_request');
        expect(errorFields(res)).toEqual(['body.name']);
      });
    });

    it('answers 400 to an empty JSON body on a POST that needs one', async () => {
      await expectNothingWritten(app, async () => {
        for (const route of ['/org/projects', '/credentials', '/browser_pools', '/org/api_keys']) {
          const res = await app.tenant.http.post(route, '');
          expectError(res, 400, 'invalid_request');
          expect(errorFields(res).length, route).toBeGreaterThan(0);
        }
      });
    });
  });

  describe('content types', () => {
    const multipart = () => {
      const form = new FormData();
      form.append('name', 'multi');
      return form;
    };

    it('answers 415 to multipart and to JSON in a charset other than UTF-8 on JSON routes', async () => {
      await expectNothingWritten(app, async () => {
        expectError(await rawRequest(app.tenant.http, 'POST', '/org/projects', multipart()), 415, 'unsupported_media_type');
        for (const charset of ['latin1', 'iso-8859-1', 'windows-1252']) {
          const res = await app.tenant.http.post('/org/projects', '{"name":"caf\u00e9"}', { 'content-type': `application/json; charset=${charset}` });
          expectError(res, 415, 'unsupported_media_type');
          expect(res.body.message).toContain('UTF-8');
        }
      });
    });

    it('answers 415 to JSON on the raw and multipart file routes, before looking for the browser', async () => {
      const write = await app.tenant.http.put('/browsers/nope/fs/write_file?path=/x', { a: 1 });
      expectError(write, 415, 'unsupported_media_type');
      expect(write.body.message).toContain('application/octet-stream');
      for (const op of ['upload', 'upload_zip']) {
        const res = await app.tenant.http.post(`/browsers/nope/fs/${op}`, { dest_path: '/x' });
        expectError(res, 415, 'unsupported_media_type');
        expect(res.body.message).toContain('multipart/form-data');
      }
    });
  });

  describe('invalid UTF-8', () => {
    it('answers 400 invalid_json to a body with invalid UTF-8 bytes instead of storing U+FFFD', async () => {
      await expectNothingWritten(app, async () => {
        const body = Buffer.concat([Buffer.from('{"name":"bad'), Buffer.from([0xc3, 0x28]), Buffer.from('"}')]);
        const res = await rawRequest(app.tenant.http, 'POST', '/org/projects', new Uint8Array(body), { 'content-type': 'application/json' });
        expectError(res, 400, 'invalid_json');
        expect(res.body.details).toEqual([expect.objectContaining({ code: 'invalid_utf8' })]);
      });
    });

    it.each(['/org/projects/%C3%28', '/profiles/%C3%28', '/credentials/a%C3%28', '/browser_pools/%C3%28', '/browsers/%C3%28'])(
      'answers 400 invalid_path to %s',
      async (route) => {
        expectError(await app.tenant.http.get(route), 400, 'invalid_path');
      },
    );

    it.each(['/org/projects?name=%C3%28', '/browsers?query=%C3%28', '/profiles?name=%zz', '/credentials?limit=1&domain=%C3', '/org/api_keys?query=%ED%A0%80'])(
      'answers 400 invalid_query to %s instead of filtering by the raw text',
      async (route) => {
        const res = await app.tenant.http.get(route);
        expectError(res, 400, 'invalid_query');
        expect(res.body.details).toEqual([expect.objectContaining({ field: 'query' })]);
      },
    );

    it('still reads well-encoded UTF-8 and + in queries', async () => {
      expect((await app.tenant.http.post('/org/projects', { name: 'café bar' })).status).toBe(200);
      const res = await app.tenant.http.get('/org/projects?name=caf%C3%A9+bar');
      expect(res.status).toBe(200);
      expect((res.body as Array<{ name: string }>).map((p) => p.name)).toEqual(['café bar']);
    });
  });

  describe('pagination values', () => {
    const lists = ['/org/projects', '/browsers', '/profiles', '/credentials', '/browser_pools', '/org/api_keys', '/proxies', '/invocations'];
    const bad: Array<[string, string]> = [
      ['limit=1e308', 'query.limit'],
      ['limit=-1', 'query.limit'],
      ['limit=0', 'query.limit'],
      ['limit=abc', 'query.limit'],
      ['limit=1&limit=2', 'query.limit'],
      ['limit[a]=1', 'query.limit'],
      ['offset=99999999999999999999', 'query.offset'],
      ['offset=1.5', 'query.offset'],
      ['offset=-1', 'query.offset'],
      ['offset=Infinity', 'query.offset'],
    ];
    it.each(lists)('answers 400 naming the parameter for every bad value on %s', async (list) => {
      for (const [query, field] of bad) {
        const res = await app.tenant.http.get(`${list}?${query}`);
        expectError(res, 400, 'invalid_request');
        expect(errorFields(res), `${list}?${query}`).toContain(field);
      }
    });
  });

  describe('names used in URLs', () => {
    it('refuses profile names that could not sit in a path or a Content-Disposition', async () => {
      await expectNothingWritten(app, async () => {
        for (const name of ['../x', 'a/b', 'a\\b', '..', 'a%2Fb', 'a"b', 'a;b', 'a b']) {
          const res = await app.tenant.http.post('/profiles', { name });
          expectError(res, 400, 'invalid_request');
          expect(errorFields(res), name).toEqual(['body.name']);
        }
      });
    });

    it('addresses credentials and pools named like paths exactly, with one decoding only', async () => {
      const credential = (name: string) => app.tenant.http.post('/credentials', { name, domain: 'example.com', values: { username: 'u' } });
      for (const name of ['../x', 'a%2Fb']) {
        expect((await credential(name)).status, name).toBe(200);
        expect((await app.tenant.http.post('/browser_pools', { name, size: 1 })).status, name).toBe(200);
      }
      for (const resource of ['credentials', 'browser_pools']) {
        expect((await app.tenant.http.get(`/${resource}/..%2Fx`)).body.name).toBe('../x');
        expect((await app.tenant.http.get(`/${resource}/a%252Fb`)).body.name).toBe('a%2Fb');
        // Decoded once only: %2F names the one with a slash, not a path segment.
        expectError(await app.tenant.http.get(`/${resource}/a%2Fb`), 404, 'not_found');
      }
      // Unnormalised dot segments reach no route at all.
      const dots = await exchange(app.url, (s) => void s.write(`GET /credentials/../org/limits HTTP/1.1\r\nHost: x\r\nAuthorization: ${auth}\r\nConnection: close\r\n\r\n`), 10_000);
      expect(dots.status).toBe(404);
      expect(dots.text).toContain('route_not_found');
    });
  });

  describe('header injection in names and tags', () => {
    const hostile = ['a\r\nSet-Cookie: x=1', 'a\nb', 'a\u0000b', 'a\u001b[31mb', 'a\u007fb', 'a\u0085b'];
    const creates: Array<[string, string, (bad: string) => unknown, string]> = [
      ['sessions (name)', '/browsers', (bad) => ({ name: bad }), 'body.name'],
      ['sessions (tag value)', '/browsers', (bad) => ({ tags: { team: bad } }), 'body.tags.team'],
      ['sessions (tag key)', '/browsers', (bad) => ({ tags: { [bad]: 'v' } }), 'body.tags'],
      ['pools', '/browser_pools', (bad) => ({ name: bad, size: 1 }), 'body.name'],
      ['profiles', '/profiles', (bad) => ({ name: bad }), 'body.name'],
      ['credentials', '/credentials', (bad) => ({ name: bad, domain: 'example.com', values: { username: 'u' } }), 'body.name'],
      ['api keys', '/org/api_keys', (bad) => ({ name: bad }), 'body.name'],
      ['projects', '/org/projects', (bad) => ({ name: bad }), 'body.name'],
    ];
    it.each(creates)('refuses control characters in %s with 400 and creates nothing', async (_what, route, body, field) => {
      await expectNothingWritten(app, async () => {
        for (const bad of hostile) {
          const res = await app.tenant.http.post(route, body(bad));
          expectError(res, 400, 'invalid_request');
          expect(errorFields(res).some((f) => f.startsWith(field)), `${JSON.stringify(bad)}: ${errorFields(res).join()}`).toBe(true);
        }
      });
    });

    it('refuses control characters in renames and tag updates, leaving the old values', async () => {
      const session = await app.tenant.http.post('/browsers', { name: 'calm', tags: { team: 'a' } });
      expect(session.status, session.text).toBe(200);
      const pool = await app.tenant.http.post('/browser_pools', { name: 'calm-pool', size: 1 });
      const project = await app.tenant.http.post('/org/projects', { name: 'calm-project' });
      const key = await app.tenant.http.post('/org/api_keys', { name: 'calm-key' });
      await expectNothingWritten(app, async () => {
        for (const bad of hostile) {
          expectError(await app.tenant.http.patch(`/browsers/${session.body.session_id}`, { name: bad }), 400, 'invalid_request');
          expectError(await app.tenant.http.patch(`/browsers/${session.body.session_id}`, { tags: { team: bad } }), 400, 'invalid_request');
          expectError(await app.tenant.http.patch(`/browser_pools/${pool.body.id}`, { name: bad }), 400, 'invalid_request');
          expectError(await app.tenant.http.patch(`/org/projects/${project.body.id}`, { name: bad }), 400, 'invalid_request');
          expectError(await app.tenant.http.patch(`/org/api_keys/${key.body.id}`, { name: bad }), 400, 'invalid_request');
        }
      });
    });

    it('refuses control characters in names and filters given in the URL', async () => {
      for (const route of ['/browsers/a%0D%0Ab', '/profiles/a%00b', '/credentials/a%0Ab', '/browser_pools/a%1Bb', '/org/projects?name=a%0D%0Ab', '/browsers?tags[team]=a%0Ab', '/browsers?tags[team]=a%00b', '/browsers?tags[te%00am]=a']) {
        const res = await app.tenant.http.get(route);
        expectError(res, 400, 'invalid_request');
      }
    });

    it('percent-encodes a path value it puts in a Link header (deprecated project routes)', async () => {
      const res = await app.tenant.http.get('/projects/x%0D%0ASet-Cookie:%20a=1%3E;%20rel=%22evil%22');
      expect(res.headers.get('set-cookie')).toBeNull();
      const link = res.headers.get('link');
      if (link !== null) {
        expect(link).toBe('</org/projects/x%0D%0ASet-Cookie%3A%20a%3D1%3E%3B%20rel%3D%22evil%22>; rel="successor-version"');
      }
      expectError(res, res.status, res.body.code);
      expect(res.status).toBeGreaterThanOrEqual(400);
      expect(res.status).toBeLessThan(500);
    });
  });
});

describe('slow clients (slowloris)', () => {
  // The service's deadlines, shortened so the test takes seconds; the server is built
  // by the same function the service uses.
  const timeouts = { headersTimeoutMs: 2_000, requestTimeoutMs: 4_000, checkIntervalMs: 250 };
  const slack = 2_000;
  let app: TestApp;
  let server: Server;
  let url: string;

  beforeAll(async () => {
    app = await startTestApp({ clock: systemClock });
    server = createHttpServer(buildApp(app.deps, app.services).app, timeouts);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    server?.closeAllConnections();
    if (server) await new Promise((resolve) => server.close(resolve));
    await app?.close();
  });

  it('sets header and request deadlines in the service, not Node’s defaults', () => {
    const built = createHttpServer(buildApp(app.deps, app.services).app);
    expect(built.headersTimeout).toBe(SERVER_TIMEOUTS.headersTimeoutMs);
    expect(built.requestTimeout).toBe(SERVER_TIMEOUTS.requestTimeoutMs);
    expect(SERVER_TIMEOUTS.headersTimeoutMs).toBeLessThan(60_000);
    expect(SERVER_TIMEOUTS.headersTimeoutMs).toBeLessThan(SERVER_TIMEOUTS.requestTimeoutMs);
  });

  it('closes clients that trickle headers, trickle a body or send nothing, and serves others meanwhile', async () => {
    const auth = `Bearer ${app.tenant.adminKey}`;
    const before = await snapshot(app);
    const headerTricklers = Array.from({ length: 20 }, () =>
      exchange(url, async (socket, closed) => {
        socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\n');
        await trickle(socket, closed, `X-Slow: ${'a'.repeat(60)}\r\n\r\n`, 1_000);
      }, 30_000),
    );
    const body = '{"name":"slow-body"}'.padEnd(60, ' ');
    const bodyTricklers = Array.from({ length: 20 }, () =>
      exchange(url, async (socket, closed) => {
        socket.write(`POST /org/projects HTTP/1.1\r\nHost: x\r\nAuthorization: ${auth}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`);
        await trickle(socket, closed, body, 1_000);
      }, 30_000),
    );
    const silent = Array.from({ length: 20 }, () => exchange(url, () => undefined, 30_000));

    // While every attacker holds its socket, others are served promptly.
    await sleep(1_000);
    const during: Array<{ status: number; ms: number }> = [];
    for (let i = 0; i < 5; i++) {
      during.push(await timedHealth(url));
      during.push({ status: (await fetch(`${url}/org/limits`, { headers: { authorization: auth } })).status, ms: 0 });
      await sleep(200);
    }
    for (const { status, ms } of during) {
      expect(status).toBe(200);
      expect(ms).toBeLessThan(1_000);
    }

    for (const answer of await Promise.all(headerTricklers)) {
      expect(answer.closed).toBe(true);
      expect(answer.elapsedMs).toBeGreaterThanOrEqual(timeouts.headersTimeoutMs - 100);
      expect(answer.elapsedMs).toBeLessThan(timeouts.headersTimeoutMs + timeouts.checkIntervalMs + slack);
      expect([408, undefined]).toContain(answer.status);
    }
    for (const answer of await Promise.all(bodyTricklers)) {
      expect(answer.closed).toBe(true);
      expect(answer.elapsedMs).toBeLessThan(timeouts.requestTimeoutMs + timeouts.checkIntervalMs + slack);
      expect([408, undefined]).toContain(answer.status);
    }
    for (const answer of await Promise.all(silent)) {
      expect(answer.closed).toBe(true);
      expect(answer.elapsedMs).toBeLessThan(timeouts.headersTimeoutMs + timeouts.checkIntervalMs + slack);
    }
    // The trickled project body never completed, so nothing was created.
    expect(await snapshot(app)).toEqual(before);
    expect((await timedHealth(url)).status).toBe(200);
  }, 60_000);
});

describe('path traversal in browser file paths (real agent)', () => {
  let app: TestApp;
  let fs: FsSession;
  let outside: string;

  beforeAll(async () => {
    app = await startTestApp({ clock: systemClock });
    const { http } = await newProject(app.tenant.http);
    fs = await newFsSession(app, http);
    outside = await mkdtemp(path.join(os.tmpdir(), 'bp-hostile-outside-'));
    await writeHostFile(path.join(outside, 'secret.txt'), 'secret');
  }, 120_000);
  afterAll(async () => {
    await app?.close();
    if (outside) await rm(outside, { recursive: true, force: true });
  });

  const outsideUnchanged = async () => expect(await readdir(outside)).toEqual(['secret.txt']);
  const fsQuery = (op: string, rawQuery: string) => rawRequest(fs.client, 'GET', `/browsers/${fs.id}/fs/${op}?${rawQuery}`);
  /** `outside`, reached from the browser's root with enough "..". */
  const climb = () => '/..'.repeat(fs.hostRoot.split('/').length) + outside;

  it('refuses percent-encoded dot segments in query paths once decoded', async () => {
    const encoded = climb().replace(/\./g, '%2e').replace(/\//g, '%2f');
    for (const op of ['read_file', 'file_info', 'list_files', 'download_dir_zip']) {
      const res = await fsQuery(op, `path=${encoded}${op === 'read_file' || op === 'file_info' ? '%2fsecret.txt' : ''}`);
      expectError(res, 400, 'invalid_path');
    }
    expectError(await rawRequest(fs.client, 'PUT', `/browsers/${fs.id}/fs/write_file?path=${encoded}%2fnew.txt`, 'x', { 'content-type': 'application/octet-stream' }), 400, 'invalid_path');
    await outsideUnchanged();
  });

  it('treats double-encoded dots as literal names inside the root, never as a way up', async () => {
    const doubled = climb().replace(/\./g, '%252e') + '/secret.txt';
    const res = await fsQuery('read_file', `path=${doubled}`);
    expect([400, 404]).toContain(res.status);
    expect(res.text).not.toContain('secret"');
    expect(res.bytes.toString()).not.toBe('secret');
  });

  it('treats backslashes as ordinary characters in a name: nothing is written outside', async () => {
    const backslashed = climb().replace(/\//g, '\\') + '\\bs.txt';
    const res = await writeFile(fs, `/${backslashed}`, 'x');
    // A file of that odd name inside the root, or a refusal: never a file in `outside`.
    expect([200, 204, 400, 404]).toContain(res.status);
    await outsideUnchanged();
    await expect(stat(path.join(outside, 'bs.txt'))).rejects.toThrow();
  });

  it('refuses NUL bytes in query and body paths with 400 invalid_path', async () => {
    expectError(await fsQuery('read_file', 'path=/etc%00/../passwd'), 400, 'invalid_path');
    expectError(await fsPut(fs, 'create_directory', { path: '/a\u0000b' }), 400, 'invalid_path');
    expectError(await fsPut(fs, 'delete_file', { path: `${climb()}/secret.txt\u0000` }), 400, 'invalid_path');
    await outsideUnchanged();
  });

  it('refuses relative paths and repeated path parameters with 400 naming query.path', async () => {
    for (const query of ['path=etc/passwd', 'path=..%2f..%2fetc%2fpasswd', 'path=/a&path=/../../etc/passwd', 'path[0]=/etc/passwd']) {
      const res = await fsQuery('read_file', query);
      expectError(res, 400, 'invalid_request');
      expect(errorFields(res), query).toContain('query.path');
    }
  });

  it('maps absolute host paths into the browser’s root: the host’s /etc/passwd is never served', async () => {
    for (const hostPath of ['/etc/passwd', '/proc/self/environ', outside + '/secret.txt']) {
      const res = await readFile(fs, hostPath);
      expect(res.status, hostPath).toBe(404);
      expect(res.text).not.toMatch(/root:x:0:0|secret$/);
    }
  });

  it('refuses ".." in every body-taking operation and in multipart destinations', async () => {
    for (const [op, body] of [
      ['create_directory', { path: `${climb()}/made` }],
      ['delete_directory', { path: climb() }],
      ['set_file_permissions', { path: `${climb()}/secret.txt`, mode: '777' }],
      ['move', { src_path: `${climb()}/secret.txt`, dest_path: '/stolen.txt' }],
    ] as const) {
      expectError(await fsPut(fs, op, body), 400, 'invalid_path');
    }
    expectError(await fs.client.post(`/browsers/${fs.id}/fs/watch`, { path: climb() }), 400, 'invalid_path');
    const form = new FormData();
    form.append('files[0][dest_path]', `${climb()}/uploaded.txt`);
    form.append('files[0][file]', new Blob(['x']), '../../../uploaded.txt');
    expectError(await rawRequest(fs.client, 'POST', `/browsers/${fs.id}/fs/upload`, form), 400, 'invalid_path');
    await outsideUnchanged();
    expect((await stat(path.join(outside, 'secret.txt'))).mode & 0o777).not.toBe(0o777);
    // A multipart file name is never used as a path.
    await expect(stat(path.join(fs.hostRoot, '..', '..', '..', 'uploaded.txt'))).rejects.toThrow();
    expect((await fsGet(fs, 'list_files', '/')).status).toBe(200);
  });
});
