import { spawnSync } from 'node:child_process';
import type Kernel from '@onkernel/sdk';
import { AuthenticationError, toFile } from '@onkernel/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { unique } from './support/sdk.js';
import { cleanupServices, startService, type RunningService } from '../support/service.js';
import { startTestPageServer, type TestPageServer } from '../support/test-page-server.js';

/**
 * The whole app flow with the real TS SDK against the built service: deploy a TypeScript
 * app (real npm installs @onkernel/sdk and playwright-core, esbuild bundles the entry),
 * invoke its actions, which run in the sandbox and call back into the service with the key
 * the run gets: one creates a real Chromium, drives it over CDP with playwright-core to a
 * page served here on 127.0.0.1, and returns its title.
 */

let service: RunningService;
let client: Kernel;
let pages: TestPageServer;
let appName: string;

const APP = (name: string) => `
import Kernel from '@onkernel/sdk';
import { chromium } from 'playwright-core';

const kernel = new Kernel();
const app = kernel.app(${JSON.stringify(name)});

app.action('title', async (_ctx: { invocation_id: string }, payload?: { url: string }) => {
  // No invocation_id: the run's key makes the browser the invocation's.
  const session = await kernel.browsers.create({ headless: true });
  const browser = await chromium.connectOverCDP(session.cdp_ws_url);
  try {
    const context = browser.contexts()[0] ?? (await browser.newContext());
    const page = context.pages()[0] ?? (await context.newPage());
    await page.goto(payload!.url);
    console.log('visited ' + payload!.url);
    return { title: await page.title(), session_id: session.session_id };
  } finally {
    await browser.close();
  }
});

app.action('boom', async (_ctx: unknown) => {
  throw new Error('boom on purpose');
});

app.action('sleepy', async (_ctx: unknown) => {
  await new Promise((resolve) => setTimeout(resolve, 120_000));
  return 'late';
});

app.action('key', async (_ctx: unknown) => process.env.KERNEL_API_KEY ?? null);
`;

const PACKAGE = JSON.stringify({ name: 'e2e-app', version: '1.0.0', private: true, type: 'module', dependencies: { '@onkernel/sdk': '0.84.0', 'playwright-core': '1.65.1' } });

beforeAll(async () => {
  service = await startService();
  const admin = service.client();
  const project = await admin.projects.create({ name: unique('runs') });
  client = service.client(undefined, { projectID: project.id, timeout: 120_000 });
  pages = await startTestPageServer({ '/hello': '<!doctype html><title>Hello from the test</title><p>hi</p>' });
  appName = unique('e2e-app');
  const { default: yazl } = await import('yazl');
  const zip = new yazl.ZipFile();
  zip.addBuffer(Buffer.from(PACKAGE), 'package.json');
  zip.addBuffer(Buffer.from(APP(appName)), 'src/index.ts');
  zip.end();
  const chunks: Buffer[] = [];
  for await (const chunk of zip.outputStream) chunks.push(chunk as Buffer);
  const created = await client.deployments.create({ file: await toFile(Buffer.concat(chunks), 'app.zip'), entrypoint_rel_path: 'src/index.ts', version: '1' });
  for await (const frame of await client.deployments.follow(created.id)) void frame;
  const done = await client.deployments.retrieve(created.id);
  if (done.status !== 'running') throw new Error(`the deployment did not build: ${done.status} ${done.status_reason ?? ''}`);
}, 300_000);
afterAll(async () => {
  await pages?.close();
  await cleanupServices();
});

describe('invoking a deployed app with the SDK', () => {
  it('runs an action that drives its own browser to a local page, then deletes the browser', async () => {
    const created = await client.invocations.create({ app_name: appName, action_name: 'title', version: '1', payload: JSON.stringify({ url: `${pages.url}/hello` }) });
    expect(created.status, created.status_reason).toBe('succeeded');
    const output = JSON.parse(created.output!) as { title: string; session_id: string };
    expect(output.title).toBe('Hello from the test');
    expect(pages.requests).toContain('/hello');
    // The browser was the invocation's, and went with it.
    expect((await client.invocations.listBrowsers(created.id)).browsers).toEqual([]);
    const live = [];
    for await (const browser of client.browsers.list()) live.push(browser.session_id);
    expect(live).not.toContain(output.session_id);
    // Its log is on the events stream, before the final state.
    const frames = [];
    for await (const frame of await client.invocations.follow(created.id)) frames.push(frame);
    expect(frames.some((frame) => frame.event === 'log' && frame.message === `visited ${pages.url}/hello`)).toBe(true);
    expect(frames.at(-1)).toMatchObject({ event: 'invocation_state', invocation: { status: 'succeeded' } });
  }, 120_000);

  it('fails an invocation whose action throws, with its message', async () => {
    const created = await client.invocations.create({ app_name: appName, action_name: 'boom', version: '1' });
    // kernel invoke prints only output: the failure is there as {"error": ...} too.
    expect(created).toMatchObject({ status: 'failed', status_reason: 'boom on purpose', output: JSON.stringify({ error: 'boom on purpose' }) });
  }, 60_000);

  it('ends an async invocation at its async_timeout_seconds', async () => {
    const created = await client.invocations.create({ app_name: appName, action_name: 'sleepy', version: '1', async: true, async_timeout_seconds: 10 });
    expect(created.status).toBe('queued');
    await expect
      .poll(async () => (await client.invocations.retrieve(created.id)).status, { timeout: 30_000, interval: 500 })
      .toBe('failed');
    expect((await client.invocations.retrieve(created.id)).status_reason).toMatch(/^timed out after 10s/);
  }, 60_000);

  it("revokes the run's key when the invocation ends", async () => {
    const created = await client.invocations.create({ app_name: appName, action_name: 'key', version: '1' });
    expect(created.status).toBe('succeeded');
    const key = JSON.parse(created.output!) as string;
    expect(key).toMatch(/^bp_/);
    await expect(service.client(key).invocations.retrieve(created.id)).rejects.toBeInstanceOf(AuthenticationError);
  }, 60_000);

  // Last: it restarts the service.
  it('fails at the next start a run the killed service left, and its process is gone with the service', async () => {
    const keyRun = await client.invocations.create({ app_name: appName, action_name: 'key', version: '1' });
    expect(keyRun.status).toBe('succeeded');
    const created = await client.invocations.create({ app_name: appName, action_name: 'sleepy', version: '1', async: true });
    await expect.poll(async () => (await client.invocations.retrieve(created.id)).status, { timeout: 20_000, interval: 250 }).toBe('running');
    const { projectID } = client;
    expect(await service.kill()).toEqual({ code: null, signal: 'SIGKILL' });
    // bwrap dies with its parent and takes the run's pid namespace along.
    await expect.poll(() => spawnSync('pgrep', ['-f', `runner-child.mjs invoke .* ${created.id}$`]).status, { timeout: 5000 }).toBe(1);
    service = await startService({ dataDir: service.dataDir });
    client = service.client(undefined, { projectID });
    expect(await client.invocations.retrieve(created.id)).toMatchObject({
      status: 'failed',
      status_reason: 'The service restarted while the invocation ran; its run was lost',
      output: JSON.stringify({ error: 'The service restarted while the invocation ran; its run was lost' }),
    });
    expect((await client.invocations.retrieve(keyRun.id)).status).toBe('succeeded');
  }, 120_000);
});
