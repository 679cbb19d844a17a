import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import net from 'node:net';
import client from 'prom-client';
import { createPool, DEFAULT_DATABASE_TIMEOUTS } from '../../api/src/db/pool.js';
import { registerDatabaseUp } from '../../api/src/http/database-metric.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../api/src/app.js';
import { FixedClock } from '../../api/src/clock.js';
import { HttpClient } from '../support/http.js';
import { startTestApp, type TestApp } from '../support/test-app.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
/** No API key: probes and documents, and pages authorised by a signed token in their URL instead. */
// The agents' side doors (/internal/…, authorised by purpose-scoped tokens) are not published.
/** replay_view_url's page and video: authorised by their token, not a key. */
const REPLAY_VIEW = ['/replays/{replay_id}/view', '/replays/{replay_id}/video'];
const PUBLIC_PATHS = ['/healthz', '/readyz', '/health', '/status', '/metrics', '/openapi.json', '/browsers/{session_id}/live', '/live-view/{path}', ...REPLAY_VIEW,
  // The home page, the API reference and their files (modules/home).
  '/', '/docs', '/ui-assets/{file}',
  // The hosted login page: authorised by its handoff code and page-session cookie.
  '/auth/hosted/{flow_id}', '/auth/hosted-assets/{file}', '/auth/hosted/{flow_id}/session', '/auth/hosted/{flow_id}/state',
  '/auth/hosted/{flow_id}/submit', '/auth/hosted/{flow_id}/events'];
const LEGACY_OPERATIONS = ['GET /projects/{id}', 'PATCH /projects/{id}', 'DELETE /projects/{id}', 'PATCH /projects/{id}/limits'];

describe('observability', () => {
  let app: TestApp;

  beforeAll(async () => {
    app = await startTestApp({
      clock: new FixedClock(new Date('2026-06-01T00:00:00Z')),
      settings: { maxBodyBytes: 1024 },
    });
  });
  afterAll(async () => app?.close());

  describe('request ids', () => {
    it('puts a fresh X-Request-Id on every response, errors included', async () => {
      const project = await app.tenant.http.post('/org/projects', { name: 'rid' });
      const responses = [
        project,
        await app.tenant.http.get('/org/projects'),
        await app.tenant.http.delete(`/org/projects/${project.body.id}`),
        await app.client().get('/org/projects'),
        await app.tenant.http.get('/nope'),
        await app.tenant.http.put('/org/projects', {}),
        await app.tenant.http.post('/org/projects', 'x'.repeat(2048)),
        await app.tenant.http.post('/org/projects', 'name', { 'content-type': 'text/plain' }),
        await app.tenant.http.post('/org/projects', '{'),
        await app.client().get('/healthz'),
        await app.client().get('/metrics'),
      ];
      expect(responses.map((r) => r.status)).toEqual([200, 200, 204, 401, 404, 405, 413, 415, 400, 200, 200]);
      const ids = responses.map((r) => r.headers.get('x-request-id'));
      for (const id of ids) expect(id).toMatch(UUID);
      expect(new Set(ids).size).toBe(ids.length);
    });

    it.each(['abc-123_DEF.9', 'a', 'x'.repeat(64), '6f1c2a8e-3b1d-4c6f-9a0e-5d2b7c8f1e3a'])(
      'echoes the sane incoming id %s',
      async (id) => {
        const ok = await app.tenant.http.get('/org/limits', { 'x-request-id': id });
        expect(ok.headers.get('x-request-id')).toBe(id);
        const failed = await app.tenant.http.get('/nope', { 'x-request-id': id });
        expect(failed.headers.get('x-request-id')).toBe(id);
      },
    );

    it.each([
      ['spaces', 'id with spaces'],
      ['200 characters', 'a'.repeat(200)],
      ['65 characters', 'a'.repeat(65)],
      ['markup', '<script>alert(1)</script>'],
      ['a header separator', 'abc;def=1'],
      ['a log-injection attempt', 'x"} {"level":60'],
      ['an empty value', ''],
    ])('replaces an incoming id with %s', async (_case, id) => {
      const res = await app.tenant.http.get('/org/limits', { 'x-request-id': id });
      expect(res.status).toBe(200);
      expect(res.headers.get('x-request-id')).toMatch(UUID);
    });

    it('exposes the request id and paging headers to browsers', async () => {
      const res = await app.tenant.http.get('/org/projects');
      const exposed = (res.headers.get('access-control-expose-headers') ?? '').split(/,\s*/);
      expect(exposed).toEqual(expect.arrayContaining(['X-Request-Id', 'X-Has-More', 'X-Next-Offset']));
    });
  });

  describe('health', () => {
    it('answers /healthz and /readyz without a key', async () => {
      const live = await app.client().get('/healthz');
      expect(live.status).toBe(200);
      expect(live.headers.get('content-type')).toMatch(/^application\/json/);
      expect(live.body).toEqual({ status: 'ok' });
      const ready = await app.client().get('/readyz');
      expect(ready.status).toBe(200);
      expect(ready.body).toEqual({ status: 'ready' });
    });

    it('fails readiness with 503 shutting_down once the app drains, while staying live', async () => {
      const built = buildApp(app.deps, app.services);
      built.lifecycle.draining = true;
      const server = await new Promise<Server>((resolve) => {
        const s = built.app.listen(0, '127.0.0.1', () => resolve(s));
      });
      try {
        const client = new HttpClient(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
        const ready = await client.get('/readyz');
        expect(ready.status).toBe(503);
        expect(ready.body.code).toBe('shutting_down');
        expect((await client.get('/healthz')).status).toBe(200);
      } finally {
        server.closeAllConnections();
        await new Promise((resolve) => server.close(resolve));
      }
    });
  });

  describe('OpenAPI document', () => {
    type Operation = {
      operationId: string;
      deprecated?: boolean;
      security?: unknown[];
      parameters?: Array<{ in: string; name: string }>;
      responses: Record<string, { headers?: Record<string, unknown> }>;
    };
    let doc: {
      openapi: string;
      info: { title: string; version: string };
      security: unknown[];
      paths: Record<string, Record<string, Operation>>;
      components: { securitySchemes: Record<string, unknown>; schemas: Record<string, { required?: string[] }> };
    };
    const operations = () =>
      Object.entries(doc.paths).flatMap(([path, item]) =>
        Object.entries(item).map(([method, op]) => ({ key: `${method.toUpperCase()} ${path}`, path, op })),
      );

    beforeAll(async () => {
      const res = await app.client().get('/openapi.json');
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/^application\/json/);
      doc = res.body;
    });

    it('is OpenAPI 3.1.0 with bearer security by default', () => {
      expect(doc.openapi).toBe('3.1.0');
      expect(doc.info.title).toBeTruthy();
      expect(doc.info.version).toBeTruthy();
      expect(doc.components.securitySchemes.bearerAuth).toEqual({ type: 'http', scheme: 'bearer' });
      expect(doc.security).toEqual([{ bearerAuth: [] }]);
    });

    it('documents every mounted route but the /internal side doors, and nothing else, under its method and template', () => {
      const { routes } = buildApp(app.deps, app.services);
      const published = routes.filter((route) => !route.path.startsWith('/internal/'));
      expect(published.length).toBeLessThan(routes.length);
      for (const route of published) {
        const op = doc.paths[route.path.replace(/\*(\w+)/g, '{$1}')]?.[route.method];
        expect(op, `${route.method} ${route.path}`).toBeDefined();
        expect(op!.operationId).toBe(route.operationId);
      }
      expect(operations()).toHaveLength(published.length);
      expect(Object.keys(doc.paths).filter((path) => path.startsWith('/internal') || path.includes('*'))).toEqual([]);
    });

    it('gives every operation a unique operationId', () => {
      const ids = operations().map((o) => o.op.operationId);
      expect(ids.every((id) => typeof id === 'string' && id.length > 0)).toBe(true);
      expect(new Set(ids).size).toBe(ids.length);
    });

    it('marks exactly the legacy /projects operations deprecated, with a 410', () => {
      const deprecated = operations().filter((o) => o.op.deprecated === true);
      expect(deprecated.map((o) => o.key).sort()).toEqual([...LEGACY_OPERATIONS].sort());
      for (const { op } of deprecated) expect(op.responses['410']).toBeDefined();
    });

    it('opens exactly the public operations with security []', () => {
      const open = operations().filter((o) => Array.isArray(o.op.security) && o.op.security.length === 0);
      expect(open.map((o) => o.path).sort()).toEqual([...PUBLIC_PATHS].sort());
      for (const { path, op } of operations()) {
        if (!PUBLIC_PATHS.includes(path)) expect(op.security, path).toBeUndefined();
      }
    });

    it('declares each template parameter as a path parameter', () => {
      for (const { key, path, op } of operations()) {
        const names = [...path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]);
        const declared = (op.parameters ?? []).filter((p) => p.in === 'path').map((p) => p.name);
        expect(declared.sort(), key).toEqual(names.sort());
      }
    });

    it('documents the paging headers of the project list and the Project schema', () => {
      const list = doc.paths['/org/projects']!.get!;
      expect(Object.keys(list.responses['200']!.headers ?? {}).sort()).toEqual(['X-Has-More', 'X-Next-Offset']);
      expect(doc.components.schemas.Project?.required?.sort()).toEqual([
        'created_at',
        'id',
        'name',
        'status',
        'updated_at',
      ]);
    });
  });

  describe('metrics', () => {
    const metricsText = async () => {
      const res = await app.client().get('/metrics');
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
      return res.text;
    };
    const counter = (text: string, labels: { method: string; route: string; status: string }) => {
      const line = text
        .split('\n')
        .find(
          (l) =>
            l.startsWith('browserplane_http_requests_total{') &&
            l.includes(`method="${labels.method}"`) &&
            l.includes(`route="${labels.route}"`) &&
            l.includes(`status="${labels.status}"`),
        );
      return line === undefined ? 0 : Number(line.split(' ').at(-1));
    };

    it('counts requests by route template, never by concrete path', async () => {
      const project = await app.tenant.http.post('/org/projects', { name: 'metered' });
      const labels = { method: 'GET', route: '/org/projects/{id}', status: '200' };
      const before = counter(await metricsText(), labels);
      await app.tenant.http.get(`/org/projects/${project.body.id}`);
      await app.tenant.http.get('/org/projects/metered');
      await app.tenant.http.get(`/projects/${project.body.id}`);
      await app.tenant.http.get('/org/projects/no-such-project');
      const text = await metricsText();
      expect(counter(text, labels)).toBe(before + 2);
      expect(counter(text, { method: 'GET', route: '/projects/{id}', status: '200' })).toBeGreaterThanOrEqual(1);
      expect(counter(text, { method: 'GET', route: '/org/projects/{id}', status: '404' })).toBeGreaterThanOrEqual(1);
      expect(text).toContain('# TYPE browserplane_http_requests_total counter');
      expect(text).toContain('browserplane_http_request_duration_seconds_bucket');
      expect(text).not.toContain(project.body.id);
      expect(text).not.toContain('no-such-project');
      expect(text).not.toContain('metered');
    });

    it('labels unknown paths without their text', async () => {
      await app.tenant.http.get('/secret-path-xyz/12345');
      const text = await metricsText();
      expect(text).not.toContain('secret-path-xyz');
      expect(counter(text, { method: 'GET', route: 'unmatched', status: '404' })).toBeGreaterThanOrEqual(1);
    });

    it('reports the Postgres pool gauges', async () => {
      const text = await metricsText();
      expect(text).toMatch(/^browserplane_db_pool_connections \d+$/m);
      expect(text).toMatch(/^browserplane_db_pool_idle_connections \d+$/m);
      expect(text).toMatch(/^browserplane_db_pool_waiting_clients \d+$/m);
      expect(Number(/^browserplane_db_pool_connections (\d+)$/m.exec(text)![1])).toBeGreaterThan(0);
    });

    it('reports whether Postgres answers at scrape time: 1 here, 0 for a database nobody listens on', async () => {
      expect(await metricsText()).toMatch(/^browserplane_database_up 1$/m);
      // A port just freed: nothing listens there.
      const port = await new Promise<number>((resolve) => {
        const server = net.createServer().listen(0, '127.0.0.1', () => {
          const { port: free } = server.address() as net.AddressInfo;
          server.close(() => resolve(free));
        });
      });
      const gone = createPool(`postgres://nobody:x@127.0.0.1:${port}/none`, 1, DEFAULT_DATABASE_TIMEOUTS);
      gone.on('error', () => undefined);
      const registry = new client.Registry();
      registerDatabaseUp(registry, gone);
      try {
        expect(await registry.metrics()).toMatch(/^browserplane_database_up 0$/m);
      } finally {
        await gone.end();
      }
    });
  });
});
