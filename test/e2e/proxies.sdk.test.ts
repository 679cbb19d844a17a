import type Kernel from '@onkernel/sdk';
import { BadRequestError, NotFoundError } from '@onkernel/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deadPort, startCheckServer, startForwardProxy, type CheckServer, type ForwardProxy } from '../support/forward-proxy.js';
import { detailFields, rejection, unique } from './support/sdk.js';
import { cleanupServices, collect, startService, type RunningService } from '../support/service.js';

const PASSWORD = 'e2e-Proxy-Secret-5d';

let service: RunningService;
let kernel: Kernel;
let check: CheckServer;
let authed: ForwardProxy;

beforeAll(async () => {
  check = await startCheckServer('127.0.0.2');
  authed = await startForwardProxy({ egress: '127.0.0.6', auth: { username: 'carol', password: PASSWORD } });
  service = await startService({
    env: {
      BROWSERPLANE_PROXY_CHECK_URL: check.url,
      BROWSERPLANE_PROXY_UPSTREAMS: JSON.stringify([
        { name: 'dc', types: ['datacenter'], countries: ['US'], url: `http://carol:${PASSWORD}@127.0.0.1:${authed.port}` },
      ]),
    },
  });
  kernel = service.client();
});
afterAll(async () => {
  await cleanupServices();
  await Promise.all([check?.close(), authed?.close()]);
});

describe('proxies through the SDK', () => {
  it('creates, retrieves, renames, lists and deletes a custom proxy without ever returning its password', async () => {
    const name = unique('office');
    const created = await kernel.proxies.create({
      type: 'custom',
      name,
      config: { host: '127.0.0.1', port: authed.port, username: 'carol', password: PASSWORD },
    });
    expect(created).toEqual({
      id: expect.stringMatching(/^proxy_/),
      name,
      type: 'custom',
      protocol: 'http',
      bypass_hosts: [],
      config: { host: '127.0.0.1', port: authed.port, username: 'carol', has_password: true },
    });
    expect(JSON.stringify(created)).not.toContain(PASSWORD);
    expect(await kernel.proxies.retrieve(created.id!)).toEqual(created);

    const renamed = await kernel.proxies.update(created.id!, { name: `  ${name}-2  ` });
    expect(renamed.name).toBe(`${name}-2`);

    const listed = [];
    for await (const p of kernel.proxies.list({ name: `${name}-2`.toUpperCase(), limit: 1 })) listed.push(p);
    expect(listed).toEqual([renamed]);

    await kernel.proxies.delete(created.id!);
    await rejection(kernel.proxies.retrieve(created.id!), NotFoundError);
    await rejection(kernel.proxies.delete(created.id!), NotFoundError);
  });

  it('pages through every proxy with the offset pager', async () => {
    const tag = unique('page');
    const ids = [];
    for (let i = 0; i < 3; i++) ids.push((await kernel.proxies.create({ type: 'datacenter', name: tag })).id);
    const seen = [];
    for await (const p of kernel.proxies.list({ query: tag, limit: 2 })) seen.push(p.id);
    expect(seen).toEqual(ids.reverse());
  });

  it('checks a custom proxy and a managed one through the real forward proxy', async () => {
    const p = await kernel.proxies.create({
      type: 'custom',
      config: { host: '127.0.0.1', port: authed.port, username: 'carol', password: PASSWORD },
    });
    const result = await kernel.proxies.check(p.id!);
    expect(result).toMatchObject({ id: p.id, status: 'available', ip_address: '127.0.0.6', last_checked: expect.any(String) });

    const managed = await kernel.proxies.create({ type: 'datacenter' });
    expect(managed.config).toEqual({ country: 'US' });
    expect(await kernel.proxies.check(managed.id!)).toMatchObject({ status: 'available', ip_address: '127.0.0.6' });

    const dead = await kernel.proxies.create({ type: 'custom', config: { host: '127.0.0.1', port: await deadPort() } });
    expect(await kernel.proxies.check(dead.id!)).toMatchObject({ status: 'unavailable' });
  });

  it('answers errors with the SDK error classes', async () => {
    expect(detailFields(await rejection(kernel.proxies.create({ type: 'custom' } as never), BadRequestError))).toEqual([
      'body.config',
    ]);
    const unserved = await rejection(kernel.proxies.create({ type: 'residential', config: { country: 'DE' } }), BadRequestError);
    expect((unserved.error as { code: string }).code).toBe('no_matching_upstream');
    const p = await kernel.proxies.create({ type: 'datacenter' });
    expect(detailFields(await rejection(kernel.proxies.update(p.id!, { name: ' ' }), BadRequestError))).toEqual(['body.name']);
    expect(
      detailFields(await rejection(kernel.proxies.check(p.id!, { url: 'http://169.254.169.254/' }), BadRequestError)),
    ).toEqual(['body.url']);
    await rejection(kernel.proxies.retrieve('proxy_missing'), NotFoundError);
    await rejection(kernel.proxies.update('proxy_missing', { name: 'x' }), NotFoundError);
    await rejection(kernel.proxies.check('proxy_missing'), NotFoundError);
  });

  it('keeps proxies of one project out of another, on every method', async () => {
    const project = await kernel.projects.create({ name: unique('proxy-iso') });
    const scoped = service.client(undefined, { projectID: project.id });
    const mine = await kernel.proxies.create({ type: 'datacenter', name: 'mine' });
    await rejection(scoped.proxies.retrieve(mine.id!), NotFoundError);
    await rejection(scoped.proxies.update(mine.id!, { name: 'stolen' }), NotFoundError);
    await rejection(scoped.proxies.check(mine.id!), NotFoundError);
    await rejection(scoped.proxies.delete(mine.id!), NotFoundError);
    const theirs = await scoped.proxies.create({ type: 'datacenter', name: 'theirs' });
    expect((await collect(scoped.proxies.list())).map((p) => p.id)).toEqual([theirs.id]);
    expect((await collect(kernel.proxies.list())).map((p) => p.id)).not.toContain(theirs.id);
    expect((await kernel.proxies.retrieve(mine.id!)).name).toBe('mine');
  });
});
