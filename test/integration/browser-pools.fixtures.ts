import { afterAll, beforeAll, expect } from 'vitest';
import type { Clock } from '../../api/src/clock.js';
import type { HttpClient, HttpResponse } from '../support/http.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { FakeAgent, FakeRuntime, useRuntime } from './browsers.fixtures.js';

/**
 * The organisation's session cap in pool tests. Pool sizes count against it, and most
 * tests of a file share the first org, so it sits well above what they add up to.
 */
export const ORG_CAP = 1000;

export interface PoolTestApp {
  app: TestApp;
  /** The first org's admin client. */
  http: HttpClient;
  /** Records launches: pools warm no browsers in this slice, so it should see none. */
  runtime: FakeRuntime;
}

/**
 * The app for a pool test file, started in beforeAll and closed in afterAll, with a
 * stand-in runtime so that nothing here can start a real Chromium.
 */
export function startPoolApp(options: { clock: Clock }): PoolTestApp {
  const ctx = {} as PoolTestApp;
  let agent: FakeAgent | undefined;
  beforeAll(async () => {
    ctx.app = await startTestApp({ clock: options.clock, settings: { orgMaxConcurrentSessions: ORG_CAP } });
    ctx.http = ctx.app.tenant.http;
    agent = new FakeAgent();
    ctx.runtime = new FakeRuntime(await agent.listen());
    useRuntime(ctx.app, ctx.runtime);
  });
  afterAll(async () => {
    await ctx.app?.close();
    await agent?.close();
  });
  return ctx;
}

/** A BrowserPool as the API answers it (CONTRACT §3). */
export interface Pool {
  id: string;
  acquired_count: number;
  available_count: number;
  browser_pool_config: Record<string, any> & { size: number };
  created_at: string;
  extension_ids: string[];
  name?: string;
  profile_id?: string;
}

/** Creates a pool and insists that it worked. */
export async function createPool(client: HttpClient, body: Record<string, unknown>): Promise<Pool> {
  const res = await client.post<Pool>('/browser_pools', body);
  expect(res.status, res.text).toBe(200);
  return res.body;
}

/** Every error answers `{code, message, details}`; this checks the status, the code and that shape. */
export function expectError(res: HttpResponse, status: number, code: string): void {
  expect(res.status, res.text).toBe(status);
  expect(res.body).toMatchObject({ code, message: expect.any(String), details: expect.any(Array) });
  expect(res.body.message).not.toBe('');
}

/** The ids of a list response, in order. */
export const poolIds = (res: HttpResponse<Pool[]>): string[] => res.body.map((p) => p.id);

/** Every live pool of the client's project, newest first (one page of 100). */
export async function livePoolIds(client: HttpClient): Promise<string[]> {
  const res = await client.get<Pool[]>('/browser_pools?limit=100');
  expect(res.status, res.text).toBe(200);
  return poolIds(res);
}

/** A project's max_pooled_sessions cap, set through the limits API. */
export async function capPooledSessions(admin: HttpClient, projectId: string, max: number): Promise<void> {
  const res = await admin.patch(`/org/projects/${projectId}/limits`, { max_pooled_sessions: max });
  expect(res.status, res.text).toBe(200);
  expect(res.body.max_pooled_sessions).toBe(max);
}

/** A custom proxy of the client's project. */
export async function createProxy(client: HttpClient, host = 'proxy.example.test'): Promise<string> {
  const res = await client.post('/proxies', { type: 'custom', name: 'pool proxy', config: { host, port: 3128 } });
  expect(res.status, res.text).toBe(200);
  return res.body.id as string;
}

/** A profile of the client's project. */
export async function createProfile(client: HttpClient, name: string): Promise<string> {
  const res = await client.post('/profiles', { name });
  expect(res.status, res.text).toBe(200);
  return res.body.id as string;
}
