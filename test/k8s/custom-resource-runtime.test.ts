import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ANNOTATIONS, API_VERSION, FIELD_MANAGERS, LABELS, PLURALS, resourceNameOf } from '../../contract/kinds.js';
import type { BrowserLaunchSpec } from '../../contract/browser-runtime.js';
import { createCustomResourceRuntime, type CustomResourceRuntime } from '../../api/src/runtime/custom-resource-runtime.js';
import { LAUNCH_SPEC_KEY, launchSecretNameOf, SESSION_PHASES, SESSION_REASONS as READY_REASONS } from '../../contract/kinds.js';
import { eventually } from '../support/eventually.js';
import { launchSpec } from './support/browser-sessions.js';
import { freshNamespace, installCrds, kubeConfig, rawRequest } from './support/kube.js';
import { testAgentTokens } from '../support/agent-access.js';

// The API's BrowserRuntime in Kubernetes mode against the real API server. No operator
// runs here: the test plays its part of the contract, writing status through the /status
// subresource exactly as the operator's reconciler does (phase, agentUrl, message,
// conditions), and holding a finalizer where the operator would.

let namespace: string;
let runtime: CustomResourceRuntime;
const sessions = () => `/apis/${API_VERSION}/namespaces/${namespace}/${PLURALS.BrowserSession}`;
const secrets = () => `/api/v1/namespaces/${namespace}/secrets`;

beforeAll(async () => {
  await installCrds();
  namespace = await freshNamespace('crruntime');
  runtime = createCustomResourceRuntime({ config: kubeConfig(), namespace, log: pino({ level: 'silent' }), agentTokens: testAgentTokens, launchTimeoutMs: 30_000, terminateMarginMs: 5_000 });
});
afterAll(async () => {
  await runtime?.close();
});

let counter = 0;
const spec = (overrides: Partial<BrowserLaunchSpec> = {}): BrowserLaunchSpec => launchSpec(`bs_cr${++counter}${Date.now().toString(36)}`, overrides);

function waitForResource(name: string): Promise<Record<string, any>> {
  return eventually(
    async () => {
      const answer = await rawRequest('GET', `${sessions()}/${name}`);
      return answer.status === 200 ? (answer.body as Record<string, any>) : undefined;
    },
    { timeoutMs: 20_000, intervalMs: 100, what: `BrowserSession ${name} to appear` },
  );
}

/** What the operator writes once the pod is ready (or failed), through /status. */
async function writeStatus(name: string, status: Record<string, unknown>): Promise<void> {
  const answer = await rawRequest('PATCH', `${sessions()}/${name}/status`, { status }, 'application/merge-patch+json');
  expect(answer.status, JSON.stringify(answer.body)).toBe(200);
}

const condition = (status: 'True' | 'False', reason: string, message: string) => ({
  type: 'Ready',
  status,
  reason,
  message,
  observedGeneration: 1,
  lastTransitionTime: new Date().toISOString().replace(/\.\d+Z$/, 'Z'),
});

async function running(name: string, browserId: string, agentUrl: string): Promise<void> {
  await writeStatus(name, {
    phase: SESSION_PHASES.running,
    sessionId: browserId,
    podName: `browser-${name}`,
    agentUrl,
    observedGeneration: 1,
    conditions: [condition('True', READY_REASONS.podReady, 'the agent serves the browser')],
  });
}

const signal = () => AbortSignal.timeout(45_000);

describe('the custom resource runtime (the API in Kubernetes mode)', () => {
  it('writes the contract’s BrowserSession and launch Secret, and resolves once the operator reports Running', async () => {
    const wanted = spec({
      stealth: true,
      startUrl: 'https://example.com/start',
      proxy: { url: 'http://proxy.example:3128', username: 'user', password: 'hunter2-proxy-password', bypassHosts: [] },
      profile: { id: 'prof_1', archiveUrl: 'http://api.internal/profiles/prof_1?token=archive-token-secret', saveChanges: true },
      chromePolicy: { BookmarkBarEnabled: false },
      labels: { [LABELS.poolId]: 'pool_abc', team: 'qa' },
    });
    const name = resourceNameOf(wanted.browserId);
    const launched = runtime.launch(wanted, { signal: signal() });
    const resource = await waitForResource(name);

    expect(resource.metadata.labels).toEqual({
      [LABELS.sessionId]: wanted.browserId,
      [LABELS.orgId]: wanted.orgId,
      [LABELS.projectId]: wanted.projectId,
      [LABELS.poolId]: 'pool_abc',
    });
    expect(resource.metadata.annotations).toEqual({ [ANNOTATIONS.createdBy]: 'api' });
    expect(resource.spec).toEqual({
      headless: true,
      stealth: true,
      kioskMode: false,
      viewport: { width: 1024, height: 768 },
      startUrl: 'https://example.com/start',
      profile: { id: 'prof_1', saveChanges: true },
      chromePolicy: { BookmarkBarEnabled: false },
      tags: { team: 'qa' },
      project: wanted.projectId,
    });
    expect((resource.metadata.managedFields as { manager: string }[]).map((f) => f.manager)).toEqual([FIELD_MANAGERS.api]);
    // Secrets stay out of the resource: anyone who may read BrowserSessions would read them.
    expect(JSON.stringify(resource)).not.toMatch(/hunter2|archive-token-secret/);

    const secret = (await rawRequest('GET', `${secrets()}/${launchSecretNameOf(wanted.browserId)}`)).body as Record<string, any>;
    expect(secret.metadata.labels).toEqual({ [LABELS.sessionId]: wanted.browserId });
    expect(secret.metadata.ownerReferences).toEqual([
      { apiVersion: API_VERSION, kind: 'BrowserSession', name, uid: resource.metadata.uid, controller: false, blockOwnerDeletion: false },
    ]);
    expect(JSON.parse(Buffer.from(secret.data[LAUNCH_SPEC_KEY], 'base64').toString())).toEqual(wanted);

    // Still waiting while the operator reports the pod starting.
    await writeStatus(name, { phase: SESSION_PHASES.pending, podName: `browser-${name}`, conditions: [condition('False', READY_REASONS.podStarting, 'pod starting')] });
    const early = await Promise.race([launched, new Promise((resolve) => setTimeout(() => resolve('waiting'), 500))]);
    expect(early).toBe('waiting');

    await running(name, wanted.browserId, 'http://127.0.0.9:9222');
    expect(await launched).toMatchObject({ browserId: wanted.browserId, phase: 'Ready', agentUrl: 'http://127.0.0.9:9222' });
    expect(await runtime.observe(wanted.browserId)).toMatchObject({ phase: 'Ready', agentUrl: 'http://127.0.0.9:9222' });
    expect((await runtime.list()).find((b) => b.browserId === wanted.browserId)).toMatchObject({ phase: 'Ready', labels: { [LABELS.poolId]: 'pool_abc' } });
    // Launching the same id again is the same browser, not a second resource.
    expect(await runtime.launch(wanted, { signal: signal() })).toMatchObject({ phase: 'Ready', agentUrl: 'http://127.0.0.9:9222' });
    await runtime.terminate(wanted.browserId, { graceMs: 0 });
  });

  it('returns a Failed observation with the operator’s message when the launch fails', async () => {
    const wanted = spec();
    const name = resourceNameOf(wanted.browserId);
    const launched = runtime.launch(wanted, { signal: signal() });
    await waitForResource(name);
    await writeStatus(name, {
      phase: SESSION_PHASES.failed,
      message: 'ErrImagePull: browser image not found',
      conditions: [condition('False', READY_REASONS.launchFailed, 'ErrImagePull: browser image not found')],
    });
    const observed = await launched;
    expect(observed.phase).toBe('Failed');
    expect(observed.reason).toContain('ErrImagePull: browser image not found');
    expect(observed.reason).toContain(READY_REASONS.launchFailed);
    await runtime.terminate(wanted.browserId, { graceMs: 0 });
    expect((await rawRequest('GET', `${sessions()}/${name}`)).status).toBe(404);
  });

  it('deletes the resource and its Secret when the launch is aborted', async () => {
    const wanted = spec();
    const name = resourceNameOf(wanted.browserId);
    const abort = new AbortController();
    const launched = runtime.launch(wanted, { signal: abort.signal });
    await waitForResource(name);
    abort.abort(new Error('caller gave up'));
    await expect(launched).rejects.toThrow('caller gave up');
    expect((await rawRequest('GET', `${sessions()}/${name}`)).status).toBe(404);
    expect((await rawRequest('GET', `${secrets()}/${launchSecretNameOf(wanted.browserId)}`)).status).toBe(404);
  });

  it('terminates by deleting the resource and waits until the operator releases its finalizer; again is a no-op', async () => {
    const wanted = spec();
    const name = resourceNameOf(wanted.browserId);
    const launched = runtime.launch(wanted, { signal: signal() });
    await waitForResource(name);
    // The operator's finalizer, as its reconciler adds it before creating the pod.
    const held = await rawRequest('PATCH', `${sessions()}/${name}`, { metadata: { finalizers: ['browserplane.dev/browser'] } }, 'application/merge-patch+json');
    expect(held.status).toBe(200);
    await running(name, wanted.browserId, 'http://127.0.0.10:9222');
    await launched;

    let ended = false;
    const terminating = runtime.terminate(wanted.browserId, { graceMs: 1000 }).then(() => (ended = true));
    await expect.poll(async () => (await runtime.observe(wanted.browserId))?.phase, { timeout: 10_000 }).toBe('Terminating');
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(ended).toBe(false);

    const released = await rawRequest('PATCH', `${sessions()}/${name}`, { metadata: { finalizers: null } }, 'application/merge-patch+json');
    expect(released.status).toBe(200);
    await terminating;
    expect((await rawRequest('GET', `${sessions()}/${name}`)).status).toBe(404);
    expect((await rawRequest('GET', `${secrets()}/${launchSecretNameOf(wanted.browserId)}`)).status).toBe(404);
    expect(await runtime.observe(wanted.browserId)).toBeUndefined();

    await runtime.terminate(wanted.browserId, { graceMs: 1000 });
    await runtime.terminate('bs_neverexisted', { graceMs: 1000 });
  });

  it('reports a browser that exited as Failed (a crash to the reaper) and a deleted resource as gone', async () => {
    const wanted = spec();
    const name = resourceNameOf(wanted.browserId);
    const launched = runtime.launch(wanted, { signal: signal() });
    await waitForResource(name);
    await running(name, wanted.browserId, 'http://127.0.0.11:9222');
    await launched;

    await writeStatus(name, {
      phase: SESSION_PHASES.failed,
      message: 'Chromium exited with code 139',
      conditions: [condition('False', READY_REASONS.browserExited, 'Chromium exited with code 139')],
    });
    await expect.poll(async () => (await runtime.observe(wanted.browserId))?.phase, { timeout: 10_000 }).toBe('Failed');
    expect((await runtime.observe(wanted.browserId))?.reason).toBe(`${READY_REASONS.browserExited}: Chromium exited with code 139`);

    // Deleted behind the API's back (kubectl delete): observe no longer finds it.
    expect((await rawRequest('DELETE', `${sessions()}/${name}`)).status).toBe(200);
    await expect.poll(() => runtime.observe(wanted.browserId), { timeout: 10_000 }).toBeUndefined();
  });

  it('leaves browsers running when it closes, and a new runtime lists them (re-adoption after an API restart)', async () => {
    const wanted = spec();
    const name = resourceNameOf(wanted.browserId);
    const own = createCustomResourceRuntime({ config: kubeConfig(), namespace, log: pino({ level: 'silent' }), agentTokens: testAgentTokens });
    const launched = own.launch(wanted, { signal: signal() });
    await waitForResource(name);
    await running(name, wanted.browserId, 'http://127.0.0.12:9222');
    await launched;
    await own.close();
    expect((await rawRequest('GET', `${sessions()}/${name}`)).status).toBe(200);

    const next = createCustomResourceRuntime({ config: kubeConfig(), namespace, log: pino({ level: 'silent' }), agentTokens: testAgentTokens });
    try {
      expect((await next.list()).find((b) => b.browserId === wanted.browserId)).toMatchObject({ phase: 'Ready', agentUrl: 'http://127.0.0.12:9222' });
      await next.terminate(wanted.browserId, { graceMs: 0 });
    } finally {
      await next.close();
    }
  });
});
