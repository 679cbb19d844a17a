import type { ChildProcess } from 'node:child_process';
import { CoreV1Api, EventsV1Api, type EventsV1Event } from '@kubernetes/client-node';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { systemClock } from '../../api/src/clock.js';
import { createEventRecorder, type EventRecorder, type EventRecorderLog } from '../../operator/src/k8s/event-recorder.js';
import { API_VERSION, PLURALS } from '../../contract/kinds.js';
import { startBrowserPoolReconciler } from '../../operator/src/reconcilers/browser-pool.js';
import { createBrowserSessionReconciler, type BrowserSessionReconciler } from '../../operator/src/reconcilers/browser-session.js';
import { REPORTING_CONTROLLER } from '../../operator/src/reconcilers/transition-events.js';
import { createKubernetesRuntime, type KubernetesRuntime } from '../../operator/src/runtime/kubernetes-runtime.js';
import { eventually } from '../support/eventually.js';
import { createLaunchSecret, createSession, deleteSession, launchSpec, newSessionId, readSession } from './support/browser-sessions.js';
import { canI, renderChart, serverSideApply, writeKubeconfig, type KubeObject } from './support/helm.js';
import { startTestApp } from '../support/test-app.js';
import { freshNamespace, installCrds, kubeConfig, rawRequest } from './support/kube.js';
import { BROWSER_IMAGE_REPOSITORY, defaultImages, startNodeAgent, type NodeAgent } from './support/node-agent.js';
import { startOperatorProcess } from './support/operator-process.js';
import { testAgentTokens } from '../support/agent-access.js';

// Events and /metrics of the operator against the real API server: in-process
// BrowserSession reconcilers with an event recorder (one namespace each: a browser that
// runs, a browser whose container exits at once, a recorder RBAC refuses), the recorder
// on its own, and the built operator process scraped over HTTP. Browser pods run under
// the suite's node agent on 127.0.0.230–239.

const CRASHING_IMAGE = 'browserplane/crashing';
const quiet = { info: () => {}, warn: () => {} };
const eventsApi = kubeConfig().makeApiClient(EventsV1Api);
const core = kubeConfig().makeApiClient(CoreV1Api);

interface InProcess {
  namespace: string;
  runtime: KubernetesRuntime;
  reconciler: BrowserSessionReconciler;
  events: EventRecorder;
  running: Promise<void>;
}

const stop = new AbortController();
const children: ChildProcess[] = [];
const recorderLines: { level: string; message: string; fields: object }[] = [];
let node: NodeAgent;
let happy: InProcess;
let crashing: InProcess;
let forbidden: InProcess;
let processNamespace: string;

const capturing: EventRecorderLog = {
  debug: (fields, message) => void recorderLines.push({ level: 'debug', message, fields }),
  warn: (fields, message) => void recorderLines.push({ level: 'warn', message, fields }),
};

function inProcess(namespace: string, image: string, recorderToken?: string): InProcess {
  const log = pino({ level: 'silent' });
  const events = createEventRecorder({ config: kubeConfig(recorderToken), reportingController: REPORTING_CONTROLLER, reportingInstance: `test-${namespace}`, log: capturing });
  const runtime = createKubernetesRuntime({
    config: kubeConfig(),
    namespace,
    pod: { image: `${image}:test` },
    log,
    agentTokens: testAgentTokens,
    launchTimeoutMs: 90_000,
    ownerReferencesOf: (browserId) => reconciler.ownerReferencesOf(browserId),
  });
  const reconciler = createBrowserSessionReconciler({ config: kubeConfig(), namespace, runtime, log, resyncMs: 1_500, terminateGraceMs: 5_000, events });
  return { namespace, runtime, reconciler, events, running: reconciler.run(stop.signal) };
}

beforeAll(async () => {
  await installCrds();
  const [a, b, c, d] = await Promise.all(['evok', 'evcrash', 'evdeny', 'evproc'].map((prefix) => freshNamespace(prefix)));
  processNamespace = d!;
  node = await startNodeAgent({
    config: kubeConfig(),
    nodeName: `node-${a}`,
    namespaces: [a!, b!, c!, d!],
    images: { ...defaultImages(), [CRASHING_IMAGE]: { argv: [process.execPath, '-e', 'process.exit(3)'] } },
    addresses: { first: 230, last: 239 },
    log: quiet,
  });
  happy = inProcess(a!, BROWSER_IMAGE_REPOSITORY);
  crashing = inProcess(b!, CRASHING_IMAGE);
  // A user with no RoleBinding: every event write is forbidden.
  forbidden = inProcess(c!, BROWSER_IMAGE_REPOSITORY, inject('controlPlane').nobodyToken);
}, 120_000);
afterAll(async () => {
  stop.abort();
  for (const child of children) child.kill('SIGKILL');
  for (const each of [happy, crashing, forbidden]) {
    await each?.running;
    await each?.runtime.close();
  }
  await node?.stop();
});

const eventsIn = async (namespace: string): Promise<EventsV1Event[]> => (await eventsApi.listNamespacedEvent({ namespace })).items;
const eventsAbout = async (namespace: string, name: string): Promise<EventsV1Event[]> =>
  (await eventsIn(namespace)).filter((event) => event.regarding?.name === name).sort((x, y) => new Date(x.eventTime).getTime() - new Date(y.eventTime).getTime());

async function runningSession(namespace: string): Promise<{ id: string; name: string; uid: string }> {
  const id = newSessionId();
  const created = await createSession(namespace, id);
  await createLaunchSecret(namespace, created, launchSpec(id));
  await eventually(() => readSession(namespace, created.metadata.name), { timeoutMs: 90_000, intervalMs: 150, what: 'Running', accept: (r) => r?.status?.phase === 'Running' });
  return { id, name: created.metadata.name, uid: created.metadata.uid };
}

describe('operator Events', () => {
  it('records Normal events on a BrowserSession at each transition of its happy path, one each', async () => {
    const { name, uid } = await runningSession(happy.namespace);
    // Resyncs every 1.5 s find nothing new: they must not add events.
    await new Promise((resolve) => setTimeout(resolve, 4_000));
    await deleteSession(happy.namespace, name);
    await eventually(() => readSession(happy.namespace, name), { timeoutMs: 60_000, intervalMs: 150, what: 'deleted', accept: (r) => r === undefined });
    await happy.events.flush();

    const events = await eventsAbout(happy.namespace, name);
    expect(events.map((event) => [event.type, event.reason])).toEqual([
      ['Normal', 'PodStarting'],
      ['Normal', 'PodReady'],
      ['Normal', 'Terminating'],
      ['Normal', 'PodDeleted'],
    ]);
    for (const event of events) {
      expect(event.regarding).toMatchObject({ apiVersion: 'browserplane.dev/v1alpha1', kind: 'BrowserSession', name, namespace: happy.namespace, uid });
      expect(event.reportingController).toBe('browserplane.dev/operator');
      expect(event.reportingInstance).toBe(`test-${happy.namespace}`);
      expect(event.series).toBeUndefined();
      expect(event.note).toBeTruthy();
    }
    expect(events[1]!.note).toMatch(/^browser running in pod /);
  });

  it('records a Warning when a launch fails', async () => {
    const id = newSessionId();
    const created = await createSession(crashing.namespace, id);
    await createLaunchSecret(crashing.namespace, created, launchSpec(id));
    const failed = await eventually(() => readSession(crashing.namespace, created.metadata.name), { timeoutMs: 60_000, intervalMs: 150, what: 'Failed', accept: (r) => r?.status?.phase === 'Failed' });
    await crashing.events.flush();
    const events = await eventsAbout(crashing.namespace, created.metadata.name);
    expect(events.map((event) => [event.type, event.reason])).toEqual([
      ['Normal', 'PodStarting'],
      ['Warning', 'LaunchFailed'],
    ]);
    expect(events[1]!.note).toBe(failed!.status!.message);
    expect(events[1]!.action).toBe('Launch');
  });

  it('aggregates repeats of one event into a series on one Event, and rate-limits each object', async () => {
    const namespace = happy.namespace;
    const about = (name: string) => ({ apiVersion: 'v1', kind: 'ConfigMap', name, namespace });
    const recorder = createEventRecorder({ config: kubeConfig(), reportingController: REPORTING_CONTROLLER, reportingInstance: 'series-test', log: capturing, burst: 5, refillPerSecond: 0.001 });
    const repeated = { type: 'Warning', action: 'Probe', reason: 'ProbeFailed', note: 'the probe failed' } as const;
    for (let i = 0; i < 4; i++) {
      recorder.record(about('flaky'), repeated);
      await new Promise((resolve) => setTimeout(resolve, 30));
    }
    recorder.record(about('flaky'), { ...repeated, note: 'another failure' });
    await recorder.flush();
    const flaky = await eventsAbout(namespace, 'flaky');
    expect(flaky).toHaveLength(2);
    const series = flaky.find((event) => event.note === 'the probe failed')!;
    expect(series.series?.count).toBe(4);
    expect(new Date(series.series!.lastObservedTime).getTime()).toBeGreaterThan(new Date(series.eventTime).getTime());
    expect(flaky.find((event) => event.note === 'another failure')!.series).toBeUndefined();

    // Five writes per object at once: distinct events beyond them are dropped, others' budgets are their own.
    for (let i = 0; i < 10; i++) recorder.record(about('noisy'), { ...repeated, note: `failure ${i}` });
    recorder.record(about('quiet'), repeated);
    await recorder.flush();
    expect(await eventsAbout(namespace, 'noisy')).toHaveLength(5);
    expect(await eventsAbout(namespace, 'quiet')).toHaveLength(1);
    expect(recorderLines.filter((line) => line.message === 'event rate limit reached for the object; dropped').length).toBeGreaterThanOrEqual(5);
  });

  it('keeps reconciling when the API server refuses its events', async () => {
    const before = recorderLines.length;
    const { name } = await runningSession(forbidden.namespace);
    await forbidden.events.flush();
    expect(await eventsIn(forbidden.namespace)).toEqual([]);
    const refusals = recorderLines.slice(before).filter((line) => line.message === 'event create refused; dropped');
    expect(refusals.length).toBeGreaterThanOrEqual(2);
    expect(refusals[0]!.fields).toMatchObject({ code: 403 });
    // Said once as a warning (a misconfigured Role), quietly after.
    expect(refusals.map((line) => line.level).slice(0, 2)).toEqual(['warn', 'debug']);
    await deleteSession(forbidden.namespace, name);
    await eventually(() => readSession(forbidden.namespace, name), { timeoutMs: 60_000, intervalMs: 150, what: 'deleted', accept: (r) => r === undefined });
  });
});

describe('BrowserPool Events', () => {
  it('records Synced and Filling for an applied pool, a Warning for a spec the API refuses, then Draining and Drained', async () => {
    const namespace = await freshNamespace('evpool');
    // No pool fill runs (no background): the pool stays Filling, and no browser is needed.
    const app = await startTestApp({ clock: systemClock });
    const events = createEventRecorder({ config: kubeConfig(), reportingController: REPORTING_CONTROLLER, reportingInstance: 'pool-test', log: capturing });
    const poolStop = new AbortController();
    const reconciling = startBrowserPoolReconciler({ config: kubeConfig(), namespace, deps: app.deps, pools: app.services.pools, workers: 2, resyncMs: 1_000, signal: poolStop.signal, events }).done;
    const poolPath = `/apis/${API_VERSION}/namespaces/${namespace}/${PLURALS.BrowserPool}/events-pool`;
    const apply = async (spec: Record<string, unknown>) => {
      const answer = await rawRequest('PATCH', `${poolPath}?fieldManager=kubectl`, { apiVersion: API_VERSION, kind: 'BrowserPool', metadata: { name: 'events-pool' }, spec }, 'application/apply-patch+yaml');
      expect(answer.status).toBeLessThan(300);
    };
    const readyReason = async () => {
      const answer = await rawRequest('GET', poolPath);
      if (answer.status === 404) return 'gone';
      return ((answer.body.status as { conditions?: { type: string; reason: string }[] } | undefined)?.conditions ?? []).find((c) => c.type === 'Ready')?.reason;
    };
    try {
      await apply({ size: 1, headless: true });
      await eventually(readyReason, { timeoutMs: 30_000, intervalMs: 150, what: 'Filling', accept: (reason) => reason === 'Filling' });
      // Resyncs every second find the same state: no new events.
      await new Promise((resolve) => setTimeout(resolve, 2_500));
      await apply({ size: 1, headless: true, chromePolicy: { 'Not a policy!': true } });
      await eventually(readyReason, { timeoutMs: 30_000, intervalMs: 150, what: 'InvalidSpec', accept: (reason) => reason === 'InvalidSpec' });
      expect((await rawRequest('DELETE', poolPath, { apiVersion: 'v1', kind: 'DeleteOptions' })).status).toBeLessThan(300);
      await eventually(readyReason, { timeoutMs: 60_000, intervalMs: 150, what: 'drained and deleted', accept: (reason) => reason === 'gone' });
      await events.flush();
      const recorded = await eventsAbout(namespace, 'events-pool');
      expect(recorded.map((event) => [event.type, event.reason, event.action])).toEqual([
        ['Normal', 'Synced', 'Create'],
        ['Normal', 'Filling', 'Fill'],
        ['Warning', 'InvalidSpec', 'Sync'],
        ['Normal', 'Draining', 'Drain'],
        ['Normal', 'Drained', 'Drain'],
      ]);
      expect(recorded[2]!.note).toMatch(/is not a Chrome policy name/);
      expect(recorded.every((event) => event.regarding?.kind === 'BrowserPool' && event.regarding.namespace === namespace)).toBe(true);
    } finally {
      poolStop.abort();
      await reconciling;
      await app.close();
    }
  });
});

/** The metric's value for the labels (all of them must match), from Prometheus text. */
function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split('\n')) {
    const match = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!match || match[1] !== name) continue;
    const have = Object.fromEntries([...(match[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1], m[2]]));
    if (Object.entries(labels).every(([key, value]) => have[key] === value)) return Number(match[3]);
  }
  return undefined;
}

describe('the operator process', () => {
  it('serves /metrics with its queues, reconciles and leadership, and records Events as its pod', async () => {
    const identity = 'operator-metrics';
    const operator = startOperatorProcess({
      kubeconfig: writeKubeconfig(),
      namespace: processNamespace,
      identity,
      env: { BROWSERPLANE_BROWSER_POD: JSON.stringify({ image: `${BROWSER_IMAGE_REPOSITORY}:test` }) },
    });
    children.push(operator.child);
    const started = await operator.waitFor('operator started; campaigning');
    const scrape = async () => {
      const response = await fetch(`http://127.0.0.1:${started.port}/metrics`);
      expect(response.status).toBe(200);
      expect(response.headers.get('content-type')).toContain('text/plain');
      return response.text();
    };
    await operator.waitFor('caches synced; reconciling', 'leading with synced caches');

    const { name, uid } = await runningSession(processNamespace);
    const text = await scrape();
    const queue = { name: 'browser-sessions' };
    expect(sample(text, 'leader_election_master_status', { name: 'browserplane-operator' })).toBe(1);
    // Session, Secret and pod events: at least one add per source, most merged by the dirty set.
    expect(sample(text, 'workqueue_adds_total', queue)).toBeGreaterThanOrEqual(2);
    expect(sample(text, 'workqueue_depth', queue)).toBeGreaterThanOrEqual(0);
    expect(sample(text, 'workqueue_queue_duration_seconds_count', queue)).toBeGreaterThanOrEqual(2);
    expect(sample(text, 'workqueue_work_duration_seconds_count', queue)).toBeGreaterThanOrEqual(2);
    // A reconcile reads caches and writes a status: well under the 90 s the launch may take.
    const workSum = sample(text, 'workqueue_work_duration_seconds_sum', queue)!;
    expect(workSum / sample(text, 'workqueue_work_duration_seconds_count', queue)!).toBeLessThan(10);
    expect(sample(text, 'workqueue_retries_total', queue)).toBeDefined();
    const reconciled = ['success', 'requeue_after'].reduce((sum, result) => sum + (sample(text, 'browserplane_operator_reconcile_total', { controller: 'browser-sessions', result }) ?? 0), 0);
    expect(reconciled).toBeGreaterThanOrEqual(2);
    expect(sample(text, 'browserplane_operator_reconcile_duration_seconds_count', { controller: 'browser-sessions', result: 'success' })).toBeGreaterThanOrEqual(1);
    expect(sample(text, 'process_cpu_seconds_total')).toBeGreaterThan(0);
    console.log(
      `operator /metrics after one session: adds ${sample(text, 'workqueue_adds_total', queue)}, reconciles ${reconciled}, mean work ${((workSum / sample(text, 'workqueue_work_duration_seconds_count', queue)!) * 1000).toFixed(1)} ms`,
    );

    const events = await eventually(() => eventsAbout(processNamespace, name), { timeoutMs: 10_000, intervalMs: 150, what: 'PodReady event', accept: (found) => found.some((event) => event.reason === 'PodReady') });
    expect(events.map((event) => event.reason)).toEqual(['PodStarting', 'PodReady']);
    expect(events.every((event) => event.reportingInstance === identity && event.regarding?.uid === uid)).toBe(true);

    await deleteSession(processNamespace, name);
    await eventually(() => readSession(processNamespace, name), { timeoutMs: 60_000, intervalMs: 150, what: 'deleted', accept: (r) => r === undefined });
    operator.child.kill('SIGTERM');
    expect(await operator.exited).toBe(0);
    expect(await core.listNamespacedPod({ namespace: processNamespace }).then((pods) => pods.items)).toEqual([]);
  });
});

describe('the chart', () => {
  const labelsOf = (object: KubeObject | undefined) => (object?.spec as { template: { metadata: { labels: Record<string, string> } } }).template.metadata.labels;

  it('lets the operator create and patch events.k8s.io Events in its namespace, and nothing else about events', async () => {
    const namespace = await freshNamespace('evrbac');
    const objects = await renderChart({ namespace });
    for (const object of objects.filter((o) => (o.kind === 'Role' || o.kind === 'RoleBinding') && o.metadata.name === 'browserplane-operator')) {
      const applied = await serverSideApply({ ...object, metadata: { ...object.metadata, namespace } }, { dryRun: false });
      expect(applied.status, JSON.stringify(applied.body)).toBeLessThan(300);
    }
    const operator = `system:serviceaccount:${namespace}:browserplane-operator`;
    const may = (verb: string, group: string, where = namespace) => canI(operator, { namespace: where, verb, group, resource: 'events' });
    expect(await may('create', 'events.k8s.io')).toBe(true);
    expect(await may('patch', 'events.k8s.io')).toBe(true);
    for (const verb of ['get', 'list', 'watch', 'update', 'delete']) expect(await may(verb, 'events.k8s.io'), verb).toBe(false);
    expect(await may('create', '')).toBe(false);
    expect(await may('create', 'events.k8s.io', 'default')).toBe(false);
  });

  it('renders a PodMonitor for the operator’s /metrics under the ServiceMonitor value, selecting only operator pods on their health port', async () => {
    const both = ['monitoring.coreos.com/v1/ServiceMonitor', 'monitoring.coreos.com/v1/PodMonitor'];
    const objects = await renderChart({ namespace: 'render-only', set: ['metrics.serviceMonitor.enabled=true'], apiVersions: both });
    const monitors = objects.filter((o) => o.kind === 'PodMonitor');
    expect(monitors).toHaveLength(1);
    const spec = monitors[0]!.spec as { selector: { matchLabels: Record<string, string> }; podMetricsEndpoints: { port: string; path: string }[] };
    const operator = objects.find((o) => o.kind === 'Deployment' && o.metadata.name === 'browserplane-operator');
    const api = objects.find((o) => o.kind === 'Deployment' && o.metadata.name === 'browserplane-api');
    const selects = (labels: Record<string, string>) => Object.entries(spec.selector.matchLabels).every(([key, value]) => labels[key] === value);
    expect(selects(labelsOf(operator))).toBe(true);
    expect(selects(labelsOf(api))).toBe(false);
    const ports = (operator!.spec as { template: { spec: { containers: { ports?: { name: string }[] }[] } } }).template.spec.containers[0]!.ports ?? [];
    expect(spec.podMetricsEndpoints).toEqual([expect.objectContaining({ port: 'health', path: '/metrics' })]);
    expect(ports.map((port) => port.name)).toContain('health');

    // Not without the Prometheus operator's PodMonitor CRD, and not unless asked for.
    expect((await renderChart({ namespace: 'render-only', set: ['metrics.serviceMonitor.enabled=true'], apiVersions: both.slice(0, 1) })).filter((o) => o.kind === 'PodMonitor')).toEqual([]);
    expect((await renderChart({ namespace: 'render-only', apiVersions: both })).filter((o) => o.kind === 'PodMonitor')).toEqual([]);
  });
});
