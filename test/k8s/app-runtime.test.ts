import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { BatchV1Api, CoreV1Api } from '@kubernetes/client-node';
import type Kernel from '@onkernel/sdk';
import { toFile } from '@onkernel/sdk';
import yazl from 'yazl';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testEncryptionKey } from '../support/agent-access.js';
import { eventually } from '../support/eventually.js';
import { cleanupServices, startService, type RunningService } from '../support/service.js';
import { startTestPageServer, type TestPageServer } from '../support/test-page-server.js';
import { startAppJobRunner, type AppJobRunner } from './support/app-job-runner.js';
import { startBrowserOperator } from './support/browser-operator.js';
import { freshNamespace, installCrds, kubeConfig } from './support/kube.js';

// The app runtime in Kubernetes mode, whole: the built service (BROWSERPLANE_RUNTIME=
// kubernetes, a runner image set) creates a build Job per deployment and a run Job per
// invocation in a real kube-apiserver; the pod program (dist/, as the runner image runs it)
// fetches its input over the internal wire with the Job's token and reports back. The
// suite's app Job runner STANDS IN for the Job controller and kubelet (none in this tier;
// test/cluster/apps.test.ts runs the real runner image as pods), as the node agent does for
// browser pods: the action's browser is a BrowserSession the in-process reconciler turns
// into a pod that the node agent runs with a real Chromium.

let namespace: string;
let operator: Awaited<ReturnType<typeof startBrowserOperator>> | undefined;
let pages: TestPageServer;
let scratch: string;
let service: RunningService;
let runner: AppJobRunner;
let client: Kernel;
const batch = () => kubeConfig().makeApiClient(BatchV1Api);
const core = () => kubeConfig().makeApiClient(CoreV1Api);

const APP = (name: string) => `
import Kernel from '@onkernel/sdk';
import { chromium } from 'playwright-core';

const kernel = new Kernel();
const app = kernel.app(${JSON.stringify(name)});

app.action('echo', async (ctx: { invocation_id: string }, payload?: { n: number }) => {
  console.log('echo ' + JSON.stringify(payload));
  return { doubled: (payload?.n ?? 0) * 2, invocation_id: ctx.invocation_id, secret_set: process.env.MY_SECRET === 's3cret' };
});

app.action('title', async (_ctx: unknown, payload?: { url: string }) => {
  const session = await kernel.browsers.create({ headless: true });
  const browser = await chromium.connectOverCDP(session.cdp_ws_url);
  try {
    const context = browser.contexts()[0] ?? (await browser.newContext());
    const page = context.pages()[0] ?? (await context.newPage());
    await page.goto(payload!.url);
    return { title: await page.title(), session_id: session.session_id };
  } finally {
    await browser.close();
  }
});

app.action('boom', async (_ctx: unknown) => {
  throw new Error('boom on purpose');
});

app.action('never', async (_ctx: unknown) => 'the runner never starts this one');

app.action('sleepy', async (_ctx: unknown) => {
  await new Promise((resolve) => setTimeout(resolve, 120_000));
  return 'late';
});
`;
const PACKAGE = JSON.stringify({ name: 'k8s-app', version: '1.0.0', private: true, type: 'module', dependencies: { '@onkernel/sdk': '0.84.0', 'playwright-core': '1.65.1' } });

beforeAll(async () => {
  await installCrds();
  namespace = await freshNamespace('apps');
  operator = await startBrowserOperator(namespace, { first: 160, last: 179 });
  pages = await startTestPageServer({ '/hello': '<!doctype html><title>hello from a k8s app</title>' });
  scratch = await mkdtemp(path.join(os.tmpdir(), 'apps-k8s-'));
  const kubeconfigFile = path.join(scratch, 'config');
  await writeFile(kubeconfigFile, kubeConfig().exportConfig(), { mode: 0o600 });
  service = await startService({
    env: {
      BROWSERPLANE_RUNTIME: 'kubernetes',
      BROWSERPLANE_ENCRYPTION_KEY: testEncryptionKey.toString('base64'),
      KUBECONFIG: kubeconfigFile,
      BROWSERPLANE_NAMESPACE: namespace,
      BROWSERPLANE_BROWSER_LAUNCH_TIMEOUT_MS: '90000',
      BROWSERPLANE_APP_RUNNER_IMAGE: 'localhost/browserplane/runner:test',
      // Room for the apps below (node_modules with playwright-core), not for the 24 MiB bundle of the bad-input case.
      BROWSERPLANE_APP_MAX_UNPACKED_MB: '20',
    },
  });
  runner = startAppJobRunner({ config: kubeConfig(), namespace, workRoot: path.join(scratch, 'pods'), skip: (args) => args[0] === 'invoke' && args[3] === 'never' });
  client = service.client();
}, 180_000);
afterAll(async () => {
  await runner?.stop();
  await cleanupServices();
  await operator?.stop();
  await pages?.close();
  if (scratch) await rm(scratch, { recursive: true, force: true });
}, 120_000);

const internal = (route: string, token?: string, init: RequestInit = {}) =>
  fetch(`${service.url}/internal/app-jobs/${route}`, { ...init, headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...(init.headers as Record<string, string> | undefined) } });

/** The token in a Job's Secret (made just after the Job). */
async function tokenOf(jobName: string): Promise<string> {
  const secret = await eventually(() => core().readNamespacedSecret({ name: jobName, namespace }), { timeoutMs: 10_000, intervalMs: 100, what: `secret ${jobName}`, retryErrors: true });
  return Buffer.from(secret.data!.token!, 'base64').toString('utf8');
}

async function waitForDeployment(id: string) {
  return eventually(
    async () => {
      const deployment = await client.deployments.retrieve(id);
      return deployment.status !== 'queued' && deployment.status !== 'in_progress' && deployment;
    },
    { timeoutMs: 240_000, intervalMs: 500, what: `deployment ${id} to build` },
  );
}

async function waitForInvocation(id: string) {
  return eventually(
    async () => {
      const invocation = await client.invocations.retrieve(id);
      return invocation.status !== 'queued' && invocation.status !== 'running' && invocation;
    },
    { timeoutMs: 120_000, intervalMs: 300, what: `invocation ${id} to end` },
  );
}

async function zipOf(files: Record<string, string>): Promise<Buffer> {
  const zip = new yazl.ZipFile();
  for (const [name, text] of Object.entries(files)) zip.addBuffer(Buffer.from(text), name);
  zip.end();
  const chunks: Buffer[] = [];
  for await (const chunk of zip.outputStream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

const jobName = (prefix: string, id: string) => `${prefix}-${id.toLowerCase().replace(/[^a-z0-9-]/g, '-')}`;

describe('the app runtime in Kubernetes mode', () => {
  let deploymentId: string;
  let buildToken: string;
  const appName = `k8s-app-${Date.now().toString(36)}`;

  it('refuses the internal wire without a live Job token', async () => {
    for (const route of ['build', 'build/source', 'run', 'run/bundle']) {
      const none = await internal(route);
      expect(none.status).toBe(401);
      expect(await none.json()).toMatchObject({ code: 'unauthorized', message: expect.any(String) });
      expect((await internal(route, 'bpjob_' + 'x'.repeat(43))).status).toBe(401);
    }
    // An API key is not a Job token.
    expect((await internal('build', service.adminKey)).status).toBe(401);
    const logs = await internal('logs', undefined, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ lines: [] }) });
    expect(logs.status).toBe(401);
  });

  it('answers bad input on the internal wire with a clear error and changes nothing; a held build\'s token reads its own deployment only', async () => {
    runner.hold = true;
    let held: string;
    try {
      const upload = Buffer.from(APP(`${appName}-held`));
      const deployment = await client.deployments.create({ file: await toFile(upload, 'index.ts'), entrypoint_rel_path: 'index.ts', env_vars: { HELD: 'yes' } });
      held = deployment.id;
      const token = await tokenOf(jobName('app-build', held));
      const post = (route: string, body: unknown, headers: Record<string, string> = { 'content-type': 'application/json' }) =>
        internal(route, token, { method: 'POST', headers, body: typeof body === 'string' ? body : JSON.stringify(body) });
      const expectError = async (answer: Response, status: number, code: string) => {
        expect(answer.status).toBe(status);
        expect(await answer.json()).toMatchObject({ code, message: expect.any(String) });
      };
      await expectError(await post('build/result', { ok: true }), 400, 'invalid_request');
      await expectError(await post('build/result', '{"ok": tru'), 400, 'invalid_json');
      await expectError(await post('build/result', { ok: true }, { 'content-type': 'text/plain' }), 415, 'unsupported_media_type');
      await expectError(await post('logs', { lines: Array.from({ length: 501 }, () => ({ stream: 'stdout', message: 'x' })) }), 400, 'invalid_request');
      await expectError(await post('logs', { lines: [{ stream: 'fd9', message: 'x' }] }), 400, 'invalid_request');
      // A build token opens no run route.
      await expectError(await internal('run', token), 401, 'unauthorized');
      expect((await client.deployments.retrieve(held)).status).toBe('queued');

      // Good input: the input (moves it to in_progress), its own source, a log line.
      const input = (await (await internal('build', token)).json()) as Record<string, unknown>;
      expect(input).toMatchObject({ deployment_id: held, entrypoint_rel_path: 'index.ts', source_type: 'upload', git_token: null, env_vars: { HELD: 'yes' }, limits: { max_unpacked_bytes: 20 * 1024 * 1024 } });
      expect((await client.deployments.retrieve(held)).status).toBe('in_progress');
      expect(Buffer.from(await (await internal('build/source', token)).arrayBuffer())).toEqual(upload);
      expect((await post('logs', { lines: [{ stream: 'stdout', message: 'a line from the held build' }] })).status).toBe(204);
      // A bundle past BROWSERPLANE_APP_MAX_UNPACKED_MB is refused whole.
      await expectError(await internal('build/bundle', token, { method: 'PUT', headers: { 'content-type': 'application/gzip' }, body: Buffer.alloc(24 * 1024 * 1024, 7) }), 413, 'payload_too_large');
      // Success without a bundle is a failed build, not a running one.
      expect((await post('build/result', { ok: true, entry: 'index.ts', runtime: 'node', checksum: null, apps: [{ name: 'held', actions: [{ name: 'a' }] }] })).status).toBe(204);
      const failed = await client.deployments.retrieve(held);
      expect(failed.status).toBe('failed');
      expect(failed.status_reason).toContain('without uploading its bundle');
      expect((await client.apps.list({ app_name: 'held' })).items).toEqual([]);
      // The report ended the token.
      await expectError(await internal('build', token), 401, 'unauthorized');
      const frames = await (await fetch(`${service.url}/deployments/${held}/events`, { headers: { authorization: `Bearer ${service.adminKey}` } })).text();
      expect(frames).toContain('a line from the held build');
    } finally {
      runner.hold = false;
    }
  }, 60_000);

  it('builds a TypeScript app in a build Job: the pod fetches the source with its token, uploads the bundle and the registry', async () => {
    const deployment = await client.deployments.create({
      file: await toFile(await zipOf({ 'package.json': PACKAGE, 'src/index.ts': APP(appName) }), 'app.zip'),
      entrypoint_rel_path: 'src/index.ts',
      env_vars: { MY_SECRET: 's3cret' },
    });
    deploymentId = deployment.id;
    expect(deployment.status).toBe('queued');
    const job = await eventually(() => batch().readNamespacedJob({ name: jobName('app-build', deployment.id), namespace }), {
      timeoutMs: 30_000,
      intervalMs: 200,
      what: 'the build Job',
      retryErrors: true,
    });
    const pod = job.spec!.template.spec!;
    expect(pod.automountServiceAccountToken).toBe(false);
    expect(pod.containers[0]!.image).toBe('localhost/browserplane/runner:test');
    expect(pod.containers[0]!.args).toEqual(['build', deployment.id]);
    // The env vars may be secrets: never in the Job (the pod fetches them with its token).
    expect(JSON.stringify(job)).not.toContain('s3cret');
    buildToken = await tokenOf(job.metadata!.name!);

    const done = await waitForDeployment(deployment.id);
    expect(done.status, done.status_reason ?? '').toBe('running');
    const apps = await client.apps.list({ app_name: appName });
    expect(apps.items[0]?.actions.map((action) => action.name).sort()).toEqual(['boom', 'echo', 'never', 'sleepy', 'title']);
    // The build's token died with its report.
    expect((await internal('build', buildToken)).status).toBe(401);
  }, 300_000);

  it('runs an action in a run Job: the output, its log lines and the deployment\'s env reach the client', async () => {
    const invocation = await client.invocations.create({ app_name: appName, version: 'latest', action_name: 'echo', payload: JSON.stringify({ n: 21 }) });
    const done = invocation.status === 'succeeded' ? invocation : await waitForInvocation(invocation.id);
    expect(done.status, done.status_reason ?? '').toBe('succeeded');
    expect(JSON.parse(done.output!)).toEqual({ doubled: 42, invocation_id: invocation.id, secret_set: true });
    const job = await batch().readNamespacedJob({ name: jobName('app-run', invocation.id), namespace });
    expect(job.spec!.template.spec!.containers[0]!.args).toEqual(['invoke', invocation.id, appName, 'echo']);
    expect(JSON.stringify(job)).not.toContain('s3cret');
    const runToken = await tokenOf(job.metadata!.name!);
    // A run's token opens nothing of builds, and nothing at all once its result is in.
    expect((await internal('build', runToken)).status).toBe(401);
    expect((await internal('run', runToken)).status).toBe(401);
    const stream = await fetch(`${service.url}/invocations/${invocation.id}/events`, { headers: { authorization: `Bearer ${service.adminKey}` } });
    expect(await stream.text()).toContain('echo {\\"n\\":21}');
  }, 120_000);

  it('runs an action that creates a browser (a BrowserSession pod), drives it with Playwright and returns the title; the browser is gone after', async () => {
    const invocation = await client.invocations.create({ app_name: appName, version: 'latest', action_name: 'title', payload: JSON.stringify({ url: `${pages.url}/hello` }) });
    const done = invocation.status === 'succeeded' ? invocation : await waitForInvocation(invocation.id);
    expect(done.status, done.status_reason ?? '').toBe('succeeded');
    const output = JSON.parse(done.output!) as { title: string; session_id: string };
    expect(output.title).toBe('hello from a k8s app');
    // The run's end deleted the browser it made: no longer listed, its BrowserSession going.
    const live: string[] = [];
    for await (const browser of client.browsers.list()) live.push(browser.session_id);
    expect(live).not.toContain(output.session_id);
  }, 180_000);

  it('fails an action that throws, with its message', async () => {
    const invocation = await client.invocations.create({ app_name: appName, version: 'latest', action_name: 'boom' });
    const done = invocation.status === 'failed' ? invocation : await waitForInvocation(invocation.id);
    expect(done.status).toBe('failed');
    expect(done.status_reason).toContain('boom on purpose');
    expect(JSON.parse(done.output!)).toEqual({ error: expect.stringContaining('boom on purpose') });
  }, 120_000);

  it('ends a run at its async_timeout_seconds, in its pod, with the setting named', async () => {
    const invocation = await client.invocations.create({ app_name: appName, version: 'latest', action_name: 'sleepy', async: true, async_timeout_seconds: 10 });
    const job = await eventually(() => batch().readNamespacedJob({ name: jobName('app-run', invocation.id), namespace }), { timeoutMs: 30_000, intervalMs: 200, what: 'the run Job', retryErrors: true });
    // The Job's own deadline is the backstop: the timeout plus the startup allowance.
    expect(job.spec!.activeDeadlineSeconds).toBe(70);
    const done = await waitForInvocation(invocation.id);
    expect(done.status).toBe('failed');
    expect(done.status_reason).toBe('timed out after 10s (async_timeout_seconds 10)');
  }, 120_000);

  it('fails a run whose Job is deleted before its pod reports, and deleting the deployment ends its runs and their Jobs', async () => {
    const lost = await client.invocations.create({ app_name: appName, version: 'latest', action_name: 'never', async: true });
    const name = jobName('app-run', lost.id);
    await eventually(() => batch().readNamespacedJob({ name, namespace }), { timeoutMs: 30_000, intervalMs: 200, what: 'the run Job', retryErrors: true });
    await batch().deleteNamespacedJob({ name, namespace });
    const failed = await waitForInvocation(lost.id);
    expect(failed.status).toBe('failed');
    expect(failed.status_reason).toContain('deleted before it finished');

    const pending = await client.invocations.create({ app_name: appName, version: 'latest', action_name: 'never', async: true });
    const pendingJob = jobName('app-run', pending.id);
    await eventually(() => batch().readNamespacedJob({ name: pendingJob, namespace }), { timeoutMs: 30_000, intervalMs: 200, what: 'the run Job', retryErrors: true });
    await client.deployments.delete(deploymentId);
    const ended = await client.invocations.retrieve(pending.id);
    expect(ended.status).toBe('failed');
    expect(ended.status_reason).toBe('Its deployment was deleted');
    await expect.poll(() => batch().readNamespacedJob({ name: pendingJob, namespace }).then((job) => Boolean(job.metadata?.deletionTimestamp), () => true), { timeout: 30_000 }).toBe(true);
    // Its bundle went with it: a new run of it would find nothing.
    expect((await internal('run/bundle', await tokenOf(pendingJob).catch(() => 'bpjob_' + 'y'.repeat(43)))).status).toBe(401);
  }, 120_000);

  it('builds a Python app (a venv with kernel from PyPI) and runs its action in a Job', async () => {
    const name = `${appName}-py`;
    const source = [
      'import kernel',
      '',
      `app = kernel.App(${JSON.stringify(name)})`,
      '',
      '',
      '@app.action("hello")',
      'def hello(ctx, payload):',
      '    print("hello from python")',
      '    return {"greeting": "hello " + payload["name"], "invocation": ctx.invocation_id}',
      '',
    ].join('\n');
    const deployment = await client.deployments.create({ file: await toFile(Buffer.from(source), 'main.py'), entrypoint_rel_path: 'main.py' });
    const built = await waitForDeployment(deployment.id);
    expect(built.status, built.status_reason ?? '').toBe('running');
    const invocation = await client.invocations.create({ app_name: name, version: 'latest', action_name: 'hello', payload: JSON.stringify({ name: 'k8s' }) });
    const done = invocation.status === 'succeeded' ? invocation : await waitForInvocation(invocation.id);
    expect(done.status, done.status_reason ?? '').toBe('succeeded');
    expect(JSON.parse(done.output!)).toEqual({ greeting: 'hello k8s', invocation: invocation.id });
  }, 400_000);

  it('fails a build on a dependency that does not exist, with npm\'s output as the reason', async () => {
    const deployment = await client.deployments.create({
      file: await toFile(await zipOf({ 'package.json': JSON.stringify({ name: 'bad', version: '1.0.0', private: true, type: 'module', dependencies: { '@onkernel/sdk': '0.84.0', 'browserplane-no-such-package-xyz': '1.0.0' } }), 'index.ts': APP(`${appName}-bad`) }), 'app.zip'),
      entrypoint_rel_path: 'index.ts',
    });
    const done = await waitForDeployment(deployment.id);
    expect(done.status).toBe('failed');
    expect(done.status_reason).toMatch(/npm (install|ci) failed/);
    expect(done.status_reason).toMatch(/404|E404|not found/i);
  }, 300_000);
});
