import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FixedClock } from '../../api/src/clock.js';
import { errorFields, type HttpClient } from '../support/http.js';
import { startTestApp, type TestApp } from '../support/test-app.js';

const START = new Date('2026-07-01T12:00:00.000Z');
const clock = new FixedClock(START);
let app: TestApp;
let http: HttpClient;

beforeAll(async () => {
  app = await startTestApp({ clock });
  http = app.tenant.http;
});
afterAll(async () => app?.close());

let seq = 0;
/** A project of the first org and a client acting in it, so each test has its own invocations. */
const newProject = async (limits?: { max_concurrent_invocations: number }) => {
  const res = await http.post('/org/projects', { name: `inv-${++seq}` });
  expect(res.status).toBe(200);
  if (limits) expect((await http.patch(`/org/projects/${res.body.id}/limits`, limits)).status).toBe(200);
  return { id: res.body.id as string, http: http.withHeaders({ 'X-Kernel-Project-Id': res.body.id }) };
};

const basic = { app_name: 'shop', action_name: 'checkout', version: '1.0.0' };
const create = (client: HttpClient, body: Record<string, unknown> = {}) =>
  client.post('/invocations', { ...basic, async: true, ...body });
const rowCount = async (projectId: string) =>
  (await app.database.db.query<{ n: number }>('SELECT count(*)::int AS n FROM invocations WHERE project_id = $1', [projectId]))
    .rows[0]!.n;

describe('POST /invocations', () => {
  it('answers 202 with a queued invocation when async, and stores what was sent', async () => {
    const { http: client } = await newProject();
    const res = await create(client, { payload: '{"cart":[1,2]}', async_timeout_seconds: 60 });
    expect(res.status).toBe(202);
    expect(res.body).toEqual({ id: expect.stringMatching(/^inv_/), action_name: 'checkout', status: 'queued' });
    const got = await client.get(`/invocations/${res.body.id}`);
    expect(got.body).toEqual({
      id: res.body.id,
      app_name: 'shop',
      action_name: 'checkout',
      version: '1.0.0',
      status: 'queued',
      started_at: START.toISOString(),
      finished_at: null,
      payload: '{"cart":[1,2]}',
    });
  });

  it('answers 200 with a queued invocation when not async (no runtime holds the request)', async () => {
    const { http: client } = await newProject();
    for (const body of [{}, { async: false }]) {
      const res = await client.post('/invocations', { ...basic, ...body });
      expect(res.status).toBe(200);
      expect(res.body.status).toBe('queued');
    }
  });

  it('accepts every JSON value as a payload and omits payload when none was given', async () => {
    const { http: client } = await newProject();
    for (const payload of ['null', '42', '"text"', '[]', ' {"a": {"b": true}} ']) {
      const res = await create(client, { payload });
      expect(res.status, payload).toBe(202);
      expect((await client.get(`/invocations/${res.body.id}`)).body.payload).toBe(payload);
    }
    const bare = await create(client);
    expect((await client.get(`/invocations/${bare.body.id}`)).body).not.toHaveProperty('payload');
  });

  it.each([
    ['missing names', { app_name: undefined, action_name: undefined, version: undefined }, ['body.action_name', 'body.app_name', 'body.version']],
    ['blank names', { app_name: '  ', action_name: '', version: 'x'.repeat(256) }, ['body.action_name', 'body.app_name', 'body.version']],
    ['a payload that is not JSON', { payload: '{bad' }, ['body.payload']],
    ['a payload that is not a string', { payload: { a: 1 } }, ['body.payload']],
    ['a timeout below 10', { async_timeout_seconds: 9 }, ['body.async_timeout_seconds']],
    ['a timeout above 3600', { async_timeout_seconds: 3601 }, ['body.async_timeout_seconds']],
    ['a fractional timeout', { async_timeout_seconds: 30.5 }, ['body.async_timeout_seconds']],
    ['a timeout without async', { async: false, async_timeout_seconds: 60 }, ['body.async_timeout_seconds']],
    ['an unknown field', { priority: 1 }, ['body']],
    ['async that is not a boolean', { async: 'yes' }, ['body.async']],
  ])('refuses %s with 400 naming the field, creating nothing', async (_, change, fields) => {
    const project = await newProject();
    const res = await project.http.post('/invocations', { ...basic, async: true, ...change });
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('invalid_request');
    expect(errorFields(res).sort()).toEqual(fields);
    expect(await rowCount(project.id)).toBe(0);
  });
});

describe('PATCH /invocations/{id}', () => {
  it('finishes with succeeded and output, setting finished_at', async () => {
    const { http: client } = await newProject();
    const { body: created } = await create(client);
    clock.advance(5_000);
    const res = await client.patch(`/invocations/${created.id}`, { status: 'succeeded', output: '{"ok":true}' });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: 'succeeded', output: '{"ok":true}', finished_at: clock.now().toISOString() });
    expect((await client.get(`/invocations/${created.id}`)).body).toEqual(res.body);
  });

  it('cancels with failed, without output', async () => {
    const { http: client } = await newProject();
    const { body: created } = await create(client);
    const res = await client.patch(`/invocations/${created.id}`, { status: 'failed' });
    expect(res.status).toBe(200);
    expect(res.body.status).toBe('failed');
    expect(res.body.finished_at).toBe(clock.now().toISOString());
    expect(res.body).not.toHaveProperty('output');
  });

  it('marks a queued invocation running (extension), idempotently, leaving finished_at null', async () => {
    const { http: client } = await newProject();
    const { body: created } = await create(client);
    for (let i = 0; i < 2; i++) {
      const res = await client.patch(`/invocations/${created.id}`, { status: 'running' });
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ status: 'running', finished_at: null });
    }
    const done = await client.patch(`/invocations/${created.id}`, { status: 'succeeded' });
    expect(done.body.status).toBe('succeeded');
  });

  it('refuses to change a finished invocation with 409 and x-should-retry false', async () => {
    const { http: client } = await newProject();
    const { body: created } = await create(client);
    const finished = await client.patch(`/invocations/${created.id}`, { status: 'succeeded', output: '1' });
    for (const body of [{ status: 'failed' }, { status: 'succeeded', output: '2' }, { status: 'running' }]) {
      const res = await client.patch(`/invocations/${created.id}`, body);
      expect(res.status).toBe(409);
      expect(res.body.code).toBe('invocation_finished');
      expect(res.headers.get('x-should-retry')).toBe('false');
    }
    expect((await client.get(`/invocations/${created.id}`)).body).toEqual(finished.body);
  });

  it.each([
    ['a missing status', {}, ['body.status']],
    ['status queued', { status: 'queued' }, ['body.status']],
    ['output that is not JSON', { status: 'succeeded', output: 'not json' }, ['body.output']],
    ['output with running', { status: 'running', output: '1' }, ['body.output']],
    ['an unknown field', { status: 'failed', reason: 'x' }, ['body']],
  ])('refuses %s with 400, changing nothing', async (_, body, fields) => {
    const { http: client } = await newProject();
    const { body: created } = await create(client);
    const res = await client.patch(`/invocations/${created.id}`, body);
    expect(res.status).toBe(400);
    expect(errorFields(res)).toEqual(fields);
    expect((await client.get(`/invocations/${created.id}`)).body.status).toBe('queued');
  });

  it('answers 404 for an unknown id', async () => {
    const res = await http.patch('/invocations/inv_nope', { status: 'failed' });
    expect(res.status).toBe(404);
    expect(res.body.code).toBe('not_found');
  });
});

describe('GET /invocations', () => {
  /** Six invocations a second apart, oldest first. */
  const arrange = async () => {
    const project = await newProject();
    const specs = [
      { app_name: 'shop', action_name: 'checkout', version: '1.0.0' },
      { app_name: 'shop', action_name: 'refund', version: '1.0.0' },
      { app_name: 'shop', action_name: 'checkout', version: '2.0.0' },
      { app_name: 'mail', action_name: 'send', version: '1.0.0' },
      { app_name: 'mail', action_name: 'bounce_100%', version: '2.0.0' },
      { app_name: 'crm', action_name: 'sync', version: '1.0.0' },
    ];
    const ids: string[] = [];
    for (const spec of specs) {
      clock.advance(1000);
      ids.push((await create(project.http, spec)).body.id);
    }
    await project.http.patch(`/invocations/${ids[1]}`, { status: 'succeeded' });
    await project.http.patch(`/invocations/${ids[3]}`, { status: 'failed' });
    await project.http.patch(`/invocations/${ids[5]}`, { status: 'running' });
    const list = async (query: string) => {
      const res = await project.http.get(`/invocations${query}`);
      expect(res.status, res.text).toBe(200);
      return (res.body as Array<{ id: string }>).map((i) => ids.indexOf(i.id));
    };
    return { project, ids, list };
  };

  it('lists newest first with the full Invocation shape', async () => {
    const { project, ids, list } = await arrange();
    expect(await list('')).toEqual([5, 4, 3, 2, 1, 0]);
    const res = await project.http.get('/invocations?limit=1');
    expect(res.body[0]).toEqual((await project.http.get(`/invocations/${ids[5]}`)).body);
  });

  it('keeps creation order for invocations started at the same instant', async () => {
    const project = await newProject();
    const ids = [];
    for (let i = 0; i < 3; i++) ids.push((await create(project.http)).body.id);
    const res = await project.http.get<Array<{ id: string }>>('/invocations');
    expect(res.body.map((i) => i.id)).toEqual(ids.reverse());
  });

  it('filters by app_name, action_name, version, status, and combinations', async () => {
    const { list } = await arrange();
    expect(await list('?app_name=shop')).toEqual([2, 1, 0]);
    expect(await list('?action_name=checkout')).toEqual([2, 0]);
    expect(await list('?version=2.0.0')).toEqual([4, 2]);
    expect(await list('?status=queued')).toEqual([4, 2, 0]);
    expect(await list('?status=succeeded')).toEqual([1]);
    expect(await list('?status=failed')).toEqual([3]);
    expect(await list('?status=running')).toEqual([5]);
    expect(await list('?app_name=shop&version=1.0.0&status=queued')).toEqual([0]);
    expect(await list('?app_name=nothing')).toEqual([]);
  });

  it('filters by deployment_id (none is set while deployments do not exist)', async () => {
    const { list } = await arrange();
    expect(await list('?deployment_id=dep_1')).toEqual([]);
  });

  it('filters by query: id exact or prefix, app or action name substring, wildcards literal', async () => {
    const { ids, list } = await arrange();
    expect(await list(`?query=${ids[2]}`)).toEqual([2]);
    expect(await list(`?query=${ids[2]!.slice(0, -3)}`)).toEqual([2]);
    expect(await list('?query=HOP')).toEqual([2, 1, 0]);
    expect(await list('?query=fun')).toEqual([1]);
    expect(await list('?query=100%25')).toEqual([4]);
    expect(await list('?query=_')).toEqual([4]);
  });

  it('filters by since as a duration or an RFC 3339 timestamp, inclusive', async () => {
    const { project, list } = await arrange();
    // The six were created 5, 4, …, 0 s before now.
    expect(await list('?since=2s')).toEqual([5, 4, 3]);
    expect(await list('?since=1500ms')).toEqual([5, 4]);
    expect(await list('?since=1m30s')).toHaveLength(6);
    expect(await list('?since=1m')).toEqual([5, 4, 3, 2, 1, 0]);
    expect(await list('?since=1h')).toHaveLength(6);
    expect(await list('?since=1d')).toHaveLength(6);
    const third = (await project.http.get('/invocations?limit=3')).body[2].started_at as string;
    expect(await list(`?since=${encodeURIComponent(third)}`)).toEqual([5, 4, 3]);
    const offset = new Date(Date.parse(third)).toISOString().replace('Z', '+00:00');
    expect(await list(`?since=${encodeURIComponent(offset)}`)).toEqual([5, 4, 3]);
  });

  it('pages with limit and offset and the pager headers', async () => {
    const { project, list } = await arrange();
    const first = await project.http.get('/invocations?limit=4');
    expect(first.headers.get('x-has-more')).toBe('true');
    expect(first.headers.get('x-next-offset')).toBe('4');
    expect(await list('?limit=4&offset=4')).toEqual([1, 0]);
    const last = await project.http.get('/invocations?limit=4&offset=4');
    expect(last.headers.get('x-has-more')).toBe('false');
    expect(last.headers.get('x-next-offset')).toBe('0');
    expect(await list('?limit=100&offset=6')).toEqual([]);
    expect(await list('?limit=1&status=queued')).toEqual([4]);
  });

  it.each([
    ['limit=0', 'query.limit'],
    ['limit=101', 'query.limit'],
    ['limit=abc', 'query.limit'],
    ['offset=-1', 'query.offset'],
    ['offset=1.5', 'query.offset'],
    ['status=done', 'query.status'],
    ['since=yesterday', 'query.since'],
    ['since=5', 'query.since'],
    ['since=5w', 'query.since'],
    ['since=-5m', 'query.since'],
    ['since=2026-13-01T00:00:00Z', 'query.since'],
    ['since=2026-07-01', 'query.since'],
    ['since=2026-07-01T00:00:00', 'query.since'],
    ['since=99999999d', 'query.since'],
    ['app_name=', 'query.app_name'],
    ['query=%00', 'query.query'],
  ])('refuses %s with 400 naming %s', async (query, field) => {
    const res = await http.get(`/invocations?${query}`);
    expect(res.status).toBe(400);
    expect(errorFields(res)).toEqual([field]);
  });
});

describe('GET and DELETE /invocations/{id}/browsers', () => {
  it('lists no browsers for a real invocation (browser sessions do not exist yet)', async () => {
    const { http: client } = await newProject();
    const { body: created } = await create(client);
    const res = await client.get(`/invocations/${created.id}/browsers`);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ browsers: [] });
  });

  it('answers 204 to deleting them, and 404 for unknown invocations', async () => {
    const { http: client } = await newProject();
    const { body: created } = await create(client);
    const res = await client.delete(`/invocations/${created.id}/browsers`);
    expect(res.status).toBe(204);
    expect(res.text).toBe('');
    expect((await client.get('/invocations/inv_nope/browsers')).status).toBe(404);
    expect((await client.delete('/invocations/inv_nope/browsers')).status).toBe(404);
  });
});

describe('tenancy', () => {
  it('hides invocations of another org and of another project: 404 everywhere, absent from lists', async () => {
    const owner = await newProject();
    const { body: created } = await create(owner.http, { app_name: 'secret-app' });
    const other = await app.newTenant('other');
    const sibling = await newProject();
    for (const client of [other.http, sibling.http, http]) {
      for (const res of [
        await client.get(`/invocations/${created.id}`),
        await client.patch(`/invocations/${created.id}`, { status: 'failed' }),
        await client.get(`/invocations/${created.id}/browsers`),
        await client.delete(`/invocations/${created.id}/browsers`),
        await client.get(`/invocations/${created.id}/events`),
      ]) {
        expect(res.status).toBe(404);
        expect(res.body.code).toBe('not_found');
      }
      expect((await client.get('/invocations?app_name=secret-app')).body).toEqual([]);
      expect((await client.get(`/invocations?query=${created.id}`)).body).toEqual([]);
    }
    expect((await owner.http.get(`/invocations/${created.id}`)).body.status).toBe('queued');
  });

  it('acts in the project of a project-scoped key', async () => {
    const project = await newProject();
    const key = await http.post('/org/api_keys', { name: 'runner', project_id: project.id });
    const scoped = app.client(key.body.key);
    const { body: created } = await create(scoped);
    expect((await project.http.get(`/invocations/${created.id}`)).status).toBe(200);
    expect((await http.get(`/invocations/${created.id}`)).status).toBe(404);
  });
});

describe('max_concurrent_invocations', () => {
  it('admits exactly the cap out of 20 parallel creates; the rest get 429 concurrency_limit_exceeded', async () => {
    const project = await newProject({ max_concurrent_invocations: 3 });
    const results = await Promise.all(Array.from({ length: 20 }, () => create(project.http)));
    const statuses = results.map((r) => r.status);
    expect(statuses.filter((s) => s === 202)).toHaveLength(3);
    expect(statuses.filter((s) => s === 429)).toHaveLength(17);
    const refused = results.find((r) => r.status === 429)!;
    expect(refused.body.code).toBe('concurrency_limit_exceeded');
    expect(refused.body.message).toMatch(/3 concurrent invocations/);
    expect(refused.headers.get('retry-after')).toBe('1');
    expect(await rowCount(project.id)).toBe(3);
  });

  it('counts queued and running, not finished: a finished one frees a slot', async () => {
    const project = await newProject({ max_concurrent_invocations: 2 });
    const a = (await create(project.http)).body.id;
    await project.http.patch(`/invocations/${a}`, { status: 'running' });
    await create(project.http);
    expect((await create(project.http)).status).toBe(429);
    await project.http.patch(`/invocations/${a}`, { status: 'succeeded' });
    expect((await create(project.http)).status).toBe(202);
    expect((await create(project.http)).status).toBe(429);
  });

  it('applies per project and counts sync creates too; no cap means no limit', async () => {
    const capped = await newProject({ max_concurrent_invocations: 1 });
    expect((await capped.http.post('/invocations', basic)).status).toBe(200);
    expect((await capped.http.post('/invocations', basic)).status).toBe(429);
    const free = await newProject();
    const results = await Promise.all(Array.from({ length: 10 }, () => create(free.http)));
    expect(results.every((r) => r.status === 202)).toBe(true);
  });
});

describe('project deletion', () => {
  it('is refused while an invocation is queued or running, and allowed once all finished', async () => {
    const project = await newProject();
    const { body: created } = await create(project.http);
    const refused = await http.delete(`/org/projects/${project.id}`);
    expect(refused.status).toBe(409);
    expect(errorFields(refused)).toContain('invocations');
    await project.http.patch(`/invocations/${created.id}`, { status: 'failed' });
    expect((await http.delete(`/org/projects/${project.id}`)).status).toBe(204);
  });
});
