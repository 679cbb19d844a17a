import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FixedClock } from '../../api/src/clock.js';
import { errorFields, type HttpResponse } from '../support/http.js';
import { startTestApp, type TestApp } from '../support/test-app.js';

const fields = errorFields;

const MAX_BODY = 1024;

/** The one error body: code, message, details (each code, field?, message), JSON. */
function expectErrorBody(res: HttpResponse, status: number, code: string): void {
  expect(res.status, res.text).toBe(status);
  expect(res.headers.get('content-type')).toMatch(/^application\/json/);
  expect(res.body).toMatchObject({ code, message: expect.any(String), details: expect.any(Array) });
  expect(res.body.message.length).toBeGreaterThan(0);
  for (const detail of res.body.details) {
    expect(detail).toMatchObject({ code: expect.any(String), message: expect.any(String) });
  }
}

describe('HTTP errors', () => {
  let app: TestApp;

  beforeAll(async () => {
    app = await startTestApp({
      clock: new FixedClock(new Date('2026-06-01T00:00:00Z')),
      settings: { maxBodyBytes: MAX_BODY },
    });
  });
  afterAll(async () => app?.close());

  const projectCount = async () => (await app.tenant.http.get('/org/projects?limit=100')).body.length as number;

  describe('routing', () => {
    it.each(['/nope', '/org/projects/a/b/c', '/org', '/v1/org/projects'])('answers 404 route_not_found for %s', async (path) => {
      const res = await app.tenant.http.get(path);
      expectErrorBody(res, 404, 'route_not_found');
      expect(res.body.details).toEqual([]);
    });

    it('answers 404 for an unknown route without asking for a key', async () => {
      expectErrorBody(await app.client().post('/nope', { a: 1 }), 404, 'route_not_found');
    });

    it.each([
      ['PUT', '/org/projects', 'GET, HEAD, POST'],
      ['DELETE', '/org/projects', 'GET, HEAD, POST'],
      ['POST', '/org/projects/proj_x', 'DELETE, GET, HEAD, PATCH'],
      ['DELETE', '/org/limits', 'GET, HEAD, PATCH'],
      ['POST', '/healthz', 'GET, HEAD'],
    ])('answers 405 method_not_allowed for %s %s with Allow: %s', async (method, path, allow) => {
      const res = await app.tenant.http.request(method, path, {});
      expectErrorBody(res, 405, 'method_not_allowed');
      expect(res.headers.get('allow')).toBe(allow);
    });

    it('answers 400 invalid_path for bad percent-encoding, on any method', async () => {
      for (const [method, path] of [
        ['GET', '/org/projects/%E0%A4%A'],
        ['PATCH', '/org/projects/%zz'],
        ['PUT', '/org/projects/%zz/limits'],
      ] as const) {
        const res = await app.tenant.http.request(method, path, method === 'GET' ? undefined : {});
        expectErrorBody(res, 400, 'invalid_path');
      }
    });
  });

  describe('request bodies', () => {
    it('answers 413 payload_too_large over maxBodyBytes, and creates nothing', async () => {
      const before = await projectCount();
      const res = await app.tenant.http.post('/org/projects', { name: 'x'.repeat(MAX_BODY) });
      expectErrorBody(res, 413, 'payload_too_large');
      expect(res.body.message).toContain(String(MAX_BODY));
      expect(await projectCount()).toBe(before);
    });

    it('reads a body just under maxBodyBytes', async () => {
      const padding = ' '.repeat(MAX_BODY - 40);
      const res = await app.tenant.http.post('/org/projects', `{"name":"just-under"}${padding}`);
      expect(res.status).toBe(200);
      expect(res.body.name).toBe('just-under');
    });

    it.each([
      ['text/plain', '{"name":"typed-text"}'],
      ['text/plain; charset=utf-8', '{"name":"typed-text"}'],
      ['application/x-www-form-urlencoded', 'name=typed-form'],
      ['application/xml', '<name>typed-xml</name>'],
    ])('answers 415 unsupported_media_type for a %s body, and creates nothing', async (type, body) => {
      const before = await projectCount();
      const res = await app.tenant.http.post('/org/projects', body, { 'content-type': type });
      expectErrorBody(res, 415, 'unsupported_media_type');
      expect(await projectCount()).toBe(before);
    });

    it('answers 415 on a PATCH with a non-JSON body and changes nothing', async () => {
      const res = await app.tenant.http.patch('/org/limits', 'default_project_max_concurrent_sessions=3', {
        'content-type': 'text/plain',
      });
      expectErrorBody(res, 415, 'unsupported_media_type');
      expect((await app.tenant.http.get('/org/limits')).body.default_project_max_concurrent_sessions).toBeNull();
    });

    it.each(['{"name":', '{name: "x"}', "{'name':'x'}", 'nul', '{"name":"x"} trailing'])(
      'answers 400 invalid_json for %j',
      async (body) => {
        expectErrorBody(await app.tenant.http.post('/org/projects', body), 400, 'invalid_json');
      },
    );

    it.each([
      ['an empty body', ''],
      ['a literal null', 'null'],
    ])('treats %s with a JSON content type as {}', async (_case, body) => {
      const create = await app.tenant.http.post('/org/projects', body);
      expectErrorBody(create, 400, 'invalid_request');
      expect(fields(create)).toEqual(['body.name']);

      const limits = await app.tenant.http.patch('/org/limits', body);
      expect(limits.status).toBe(200);
      expect(limits.body).toMatchObject({ max_concurrent_sessions: 50, default_project_max_concurrent_sessions: null });
    });

    it('treats a request with no body and no content type as {}', async () => {
      const res = await app.tenant.http.post('/org/projects');
      expectErrorBody(res, 400, 'invalid_request');
      expect(fields(res)).toEqual(['body.name']);
    });

    it('accepts application/json with a charset and the +json suffix', async () => {
      const charset = await app.tenant.http.post('/org/projects', '{"name":"with-charset"}', {
        'content-type': 'application/json; charset=utf-8',
      });
      expect(charset.status).toBe(200);
      const suffix = await app.tenant.http.patch(`/org/projects/${charset.body.id}`, '{"status":"archived"}', {
        'content-type': 'application/merge-patch+json',
      });
      expect(suffix.status).toBe(200);
      expect(suffix.body.status).toBe('archived');
    });

    it.each([
      ['an array', '[]'],
      ['a string', '"name"'],
      ['a number', '7'],
    ])('refuses %s as the body with 400 invalid_request', async (_case, body) => {
      expectErrorBody(await app.tenant.http.post('/org/projects', body), 400, 'invalid_request');
    });
  });

  describe('validation', () => {
    it('lists every issue with its code, field and message', async () => {
      const res = await app.tenant.http.post('/org/projects', { name: 5, colour: 'red' });
      expectErrorBody(res, 400, 'invalid_request');
      expect(res.body.details).toHaveLength(2);
      for (const detail of res.body.details) {
        expect(Object.keys(detail).sort()).toEqual(['code', 'field', 'message']);
      }
      expect(fields(res).sort()).toEqual(['body', 'body.name']);
      expect(res.body.message).toContain('body.name');
      expect(res.body.message).toContain('colour');
    });

    it('reports path and body problems together', async () => {
      const res = await app.tenant.http.patch(`/org/projects/${'x'.repeat(256)}/limits`, { max_pooled_sessions: -1 });
      expectErrorBody(res, 400, 'invalid_request');
      expect(fields(res).sort()).toEqual([
        'body.max_pooled_sessions',
        'params.id',
      ]);
    });

    it('sends no inner_error and no request_id on client errors', async () => {
      const res = await app.tenant.http.post('/org/projects', {});
      expect(res.body.inner_error).toBeUndefined();
      expect(res.body.request_id).toBeUndefined();
    });
  });
});

describe('internal errors', () => {
  let app: TestApp;

  beforeAll(async () => {
    app = await startTestApp({ clock: new FixedClock(new Date('2026-06-01T00:00:00Z')) });
    // Every query now fails: the next authenticated request hits an unexpected error.
    await app.deps.db.end();
  });
  afterAll(async () => app?.close());

  it('answers 500 internal_error with the request id and no internals', async () => {
    for (const res of [
      await app.tenant.http.get('/org/projects'),
      await app.tenant.http.post('/org/projects', { name: 'x' }),
      await app.tenant.http.get('/projects/proj_x'),
    ]) {
      expectErrorBody(res, 500, 'internal_error');
      const requestId = res.headers.get('x-request-id');
      expect(requestId).toBeTruthy();
      expect(res.body.request_id).toBe(requestId);
      expect(res.body.message).toContain(requestId);
      expect(res.body.details).toEqual([]);
      expect(res.text).not.toMatch(/pool|stack|\bat .*:\d+|node_modules|Error:/i);
    }
  });

  it('uses the caller’s request id in the 500 body', async () => {
    const res = await app.tenant.http.get('/org/limits', { 'x-request-id': 'trace-500-abc' });
    expect(res.status).toBe(500);
    expect(res.headers.get('x-request-id')).toBe('trace-500-abc');
    expect(res.body.request_id).toBe('trace-500-abc');
  });

  it('tells the SDK not to retry a failed write, and lets it retry a failed read', async () => {
    const write = await app.tenant.http.post('/org/projects', { name: 'x' });
    expect(write.status).toBe(500);
    expect(write.headers.get('x-should-retry')).toBe('false');
    const read = await app.tenant.http.get('/org/projects');
    expect(read.status).toBe(500);
    expect(read.headers.get('x-should-retry')).toBeNull();
  });

  it('still answers 401 for a request without a key, which needs no query', async () => {
    expectErrorBody(await app.client().get('/org/projects'), 401, 'unauthorized');
  });

  it('fails readiness with 503 while liveness stays 200', async () => {
    const ready = await app.client().get('/readyz');
    expectErrorBody(ready, 503, 'database_unreachable');
    expect((await app.client().get('/healthz')).status).toBe(200);
  });
});
