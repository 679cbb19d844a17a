import type Kernel from '@onkernel/sdk';
import { BadRequestError, ConflictError, NotFoundError, RateLimitError } from '@onkernel/sdk';
import type { InvocationFollowResponse } from '@onkernel/sdk/resources/invocations';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { detailFields, recordingFetch, rejection, unique } from './support/sdk.js';
import { cleanupServices, collect, startService, type RunningService } from '../support/service.js';

let service: RunningService;
let admin: Kernel;

beforeAll(async () => {
  service = await startService();
  admin = service.client();
});
afterAll(cleanupServices);

/** A client acting in a fresh project, so lists and caps see only this test's invocations. */
const inNewProject = async () => {
  const project = await admin.projects.create({ name: unique('invocations') });
  return { project, client: service.client(undefined, { projectID: project.id }) };
};

const params = (appName = unique('app')) => ({ app_name: appName, action_name: 'run', version: '1.2.3' });

describe('invocations.create / retrieve / update', () => {
  it('creates an async invocation (202 queued), reads it back and finishes it', async () => {
    const { client, project } = await inNewProject();
    const wire = recordingFetch();
    const recorded = service.client(undefined, { fetch: wire.fetch, projectID: project.id });
    const created = await client.invocations.create({ ...params('shop'), async: true, payload: '{"x":1}' });
    expect(created).toEqual({ id: expect.any(String), action_name: 'run', status: 'queued' });
    const status = await recorded.invocations.create({ ...params(), async: true });
    expect(wire.calls.at(-1)?.status).toBe(202);
    expect(status.status).toBe('queued');

    const got = await client.invocations.retrieve(created.id);
    expect(got).toEqual({
      id: created.id,
      app_name: 'shop',
      action_name: 'run',
      version: '1.2.3',
      status: 'queued',
      started_at: expect.any(String),
      finished_at: null,
      payload: '{"x":1}',
    });

    const done = await client.invocations.update(created.id, { status: 'succeeded', output: '{"y":2}' });
    expect(done).toMatchObject({ status: 'succeeded', output: '{"y":2}', finished_at: expect.any(String) });
    expect(await client.invocations.retrieve(created.id)).toEqual(done);
  });

  it('creates a sync invocation with 200, still queued', async () => {
    const { project } = await inNewProject();
    const wire = recordingFetch();
    const created = await service.client(undefined, { fetch: wire.fetch, projectID: project.id }).invocations.create(params());
    expect(created.status).toBe('queued');
    expect(wire.calls.at(-1)?.status).toBe(200);
  });

  it('refuses bad input with BadRequestError naming the fields', async () => {
    const { client } = await inNewProject();
    const error = await rejection(
      client.invocations.create({ ...params(), payload: 'not json', async_timeout_seconds: 5 }),
      BadRequestError,
    );
    // Out of range, and not async: both reported.
    expect(detailFields(error)).toEqual(['body.async_timeout_seconds', 'body.async_timeout_seconds', 'body.payload']);
    const created = await client.invocations.create({ ...params(), async: true });
    const patch = await rejection(client.invocations.update(created.id, { status: 'succeeded', output: '{' }), BadRequestError);
    expect(detailFields(patch)).toEqual(['body.output']);
  });

  it('refuses to finish a finished invocation with ConflictError, not retried', async () => {
    const { client, project } = await inNewProject();
    const created = await client.invocations.create({ ...params(), async: true });
    await client.invocations.update(created.id, { status: 'failed' });
    const wire = recordingFetch();
    const retrying = service.client(undefined, { maxRetries: 2, fetch: wire.fetch, projectID: project.id });
    await rejection(retrying.invocations.update(created.id, { status: 'succeeded' }), ConflictError);
    expect(wire.calls).toHaveLength(1);
  });

  it('answers NotFoundError for unknown ids and for another project’s invocation', async () => {
    const { client } = await inNewProject();
    const created = await client.invocations.create({ ...params(), async: true });
    for (const call of [
      () => admin.invocations.retrieve(created.id),
      () => admin.invocations.update(created.id, { status: 'failed' }),
      () => admin.invocations.listBrowsers(created.id),
      () => admin.invocations.deleteBrowsers(created.id),
      () => admin.invocations.follow(created.id),
      () => client.invocations.retrieve('inv_unknown'),
    ]) {
      await rejection(call(), NotFoundError);
    }
  });
});

describe('invocations.list', () => {
  it('pages newest first through the SDK pager and applies filters', async () => {
    const { client } = await inNewProject();
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await client.invocations.create({ ...params(i < 3 ? 'alpha' : 'beta'), async: true })).id);
    await client.invocations.update(ids[0]!, { status: 'succeeded' });

    const all = await collect(client.invocations.list({ limit: 2 }));
    expect(all.map((i) => i.id)).toEqual([...ids].reverse());
    const alpha = await collect(client.invocations.list({ app_name: 'alpha', status: 'queued' }));
    expect(alpha.map((i) => i.id)).toEqual([ids[2], ids[1]]);
    const recent = await collect(client.invocations.list({ since: '1h', version: '1.2.3', action_name: 'run', query: 'bet' }));
    expect(recent.map((i) => i.id)).toEqual([ids[4], ids[3]]);
    expect(await collect(client.invocations.list({ deployment_id: 'dep_none' }))).toEqual([]);
  });

  it('refuses out-of-range values with BadRequestError naming the parameter', async () => {
    for (const [query, field] of [
      [{ limit: 101 }, 'query.limit'],
      [{ offset: -1 }, 'query.offset'],
      [{ since: 'last week' }, 'query.since'],
      [{ status: 'done' as 'queued' }, 'query.status'],
    ] as const) {
      const error = await rejection(admin.invocations.list(query), BadRequestError);
      expect(detailFields(error)).toEqual([field]);
    }
  });
});

describe('invocations.listBrowsers / deleteBrowsers', () => {
  it('lists no browsers and deletes them with 204', async () => {
    const { client } = await inNewProject();
    const created = await client.invocations.create({ ...params(), async: true });
    expect(await client.invocations.listBrowsers(created.id)).toEqual({ browsers: [] });
    await expect(client.invocations.deleteBrowsers(created.id)).resolves.toBeNull();
  });
});

describe('invocations.follow', () => {
  it('streams the current state, then the finish, and ends', async () => {
    const { client } = await inNewProject();
    const created = await client.invocations.create({ ...params(), async: true });
    const stream = await client.invocations.follow(created.id);
    const events: InvocationFollowResponse[] = [];
    const reading = (async () => {
      for await (const event of stream) {
        events.push(event);
        if (event.event === 'invocation_state' && event.invocation.status === 'queued') {
          await client.invocations.update(created.id, { status: 'succeeded', output: '42' });
        }
      }
    })();
    await reading;
    expect(events.map((e) => (e.event === 'invocation_state' ? e.invocation.status : e.event))).toEqual(['queued', 'succeeded']);
    expect(events[1]).toMatchObject({ event: 'invocation_state', invocation: { id: created.id, output: '42' } });
  });

  it('ends at once after the state of a finished invocation', async () => {
    const { client } = await inNewProject();
    const created = await client.invocations.create({ ...params(), async: true });
    await client.invocations.update(created.id, { status: 'failed' });
    const events = await collect(await client.invocations.follow(created.id, { since: '5m' }));
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ event: 'invocation_state', invocation: { status: 'failed' } });
  });
});

describe('max_concurrent_invocations', () => {
  it('admits the cap out of parallel creates; the rest get RateLimitError concurrency_limit_exceeded', async () => {
    const { client, project } = await inNewProject();
    await admin.projects.limits.update(project.id, { max_concurrent_invocations: 3 });
    const results = await Promise.allSettled(Array.from({ length: 12 }, () => client.invocations.create({ ...params(), async: true })));
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(3);
    const refused = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected').map((r) => r.reason as unknown);
    expect(refused).toHaveLength(9);
    for (const error of refused) {
      expect(error).toBeInstanceOf(RateLimitError);
      expect((error as RateLimitError).error).toMatchObject({ code: 'concurrency_limit_exceeded' });
      expect((error as RateLimitError).headers.get('retry-after')).toBe('1');
    }
  });
});
