import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { CoreV1Api } from '@kubernetes/client-node';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { browserPodName, labelValue } from '../../operator/src/k8s/browser-pod.js';
import { API_VERSION, FINALIZERS, LABELS, PLURALS } from '../../contract/kinds.js';
import { eventually } from '../support/eventually.js';
import { cleanupServices, startService, type RunningService } from '../support/service.js';
import { freshDatabase, type TestDatabase } from '../support/database.js';
import { writeKubeconfig } from './support/helm.js';
import { freshNamespace, installCrds, kubeConfig, rawRequest } from './support/kube.js';
import { BROWSER_IMAGE_REPOSITORY, startNodeAgent, type NodeAgent } from './support/node-agent.js';
import { assertOperatorBuilt, startOperatorProcess, type OperatorProcess } from './support/operator-process.js';
import { testEncryptionKey } from '../support/agent-access.js';

// Operator crashes in the middle of a BrowserPool reconcile, through the real processes:
// the built API in Kubernetes mode fills the pool and leases its browsers; built operator
// processes (DATABASE_URL set, so they run the GitOps pool reconciler) campaign for one
// Lease with short timings (lease 4 s, renew deadline 3 s, retry 0.5 s) and are SIGKILLed
// at chosen points. Every scenario ends with what a finished reconcile leaves: one pool row
// per resource while it lives; after kubectl delete, no row, no resource, no browsers.

let namespace: string;
let node: NodeAgent;
let database: TestDatabase;
let service: RunningService;
let kubeconfig: string;
let operatorDataDir: string;
const operators: OperatorProcess[] = [];
const core = kubeConfig().makeApiClient(CoreV1Api);

beforeAll(async () => {
  assertOperatorBuilt();
  await installCrds();
  namespace = await freshNamespace('poolfail');
  node = await startNodeAgent({ config: kubeConfig(), nodeName: `node-${namespace}`, namespaces: [namespace], addresses: { first: 200, last: 219 }, log: { info: () => {}, warn: () => {} } });
  database = await freshDatabase();
  kubeconfig = writeKubeconfig();
  service = await startService({
    env: {
      DATABASE_URL: database.url,
      // The operator's key (support/operator-process.ts): both derive the pods' agent tokens from it, as the chart gives both the same.
      BROWSERPLANE_ENCRYPTION_KEY: testEncryptionKey.toString('base64'),
      BROWSERPLANE_RUNTIME: 'kubernetes',
      KUBECONFIG: kubeconfig, BROWSERPLANE_NAMESPACE: namespace, BROWSERPLANE_BROWSER_LAUNCH_TIMEOUT_MS: '90000' },
  });
  // One data dir for every replica, as the chart gives them one Secret.
  operatorDataDir = await mkdtemp(path.join(os.tmpdir(), 'poolfail-operator-'));
}, 180_000);
// A scenario that failed half-way leaves its operators: stopped cleanly, they hand the Lease back for the next one.
afterEach(async () => {
  const running = operators.filter((operator) => operator.child.exitCode === null && operator.child.signalCode === null);
  for (const operator of running) operator.child.kill('SIGTERM');
  await Promise.all(running.map((operator) => operator.exited));
}, 60_000);
afterAll(async () => {
  for (const operator of operators) operator.child.kill('SIGKILL');
  await Promise.all(operators.map((operator) => operator.exited));
  await cleanupServices();
  await node?.stop();
  await database?.drop();
  if (operatorDataDir) await rm(operatorDataDir, { recursive: true, force: true });
}, 120_000);

function startOperator(identity: string): OperatorProcess {
  const operator = startOperatorProcess({
    kubeconfig,
    namespace,
    identity,
    databaseUrl: database.url,
    env: { BROWSERPLANE_DATA_DIR: operatorDataDir, BROWSERPLANE_BROWSER_POD: JSON.stringify({ image: `${BROWSER_IMAGE_REPOSITORY}:test`, imagePullPolicy: 'IfNotPresent' }) },
    stderr: 'lines',
  });
  operators.push(operator);
  return operator;
}

const leading = (operator: OperatorProcess) => operator.waitFor('leading: starting controllers', 'leadership', 60_000);
const observes = (operator: OperatorProcess, leader: OperatorProcess) =>
  operator.waitFor((line) => line.msg === 'leader observed' && line.leader === leader.identity, `${leader.identity} observed as leader`, 60_000);
const finishedDrain = (operator: OperatorProcess, name: string) =>
  operator.waitFor((line) => line.msg === 'browser pool drained and deleted; finalizer released' && line.resource === `${namespace}/${name}`, `the drain of ${name} finished`, 5_000);

/** An elected operator and a standby that saw it elected. */
async function leaderAndStandby(a: string, b: string): Promise<[OperatorProcess, OperatorProcess]> {
  const leader = startOperator(a);
  await leading(leader);
  const standby = startOperator(b);
  await observes(standby, leader);
  return [leader, standby];
}

async function stop(operator: OperatorProcess): Promise<void> {
  operator.child.kill('SIGTERM');
  expect(await operator.exited).toBe(0);
}

async function kill(operator: OperatorProcess): Promise<number> {
  operator.child.kill('SIGKILL');
  const at = Date.now();
  expect(await operator.exited).toBeNull();
  return at;
}

/** When a call started and how long it took. */
async function timed(call: Promise<unknown>): Promise<{ startedAt: number; ms: number }> {
  const startedAt = Date.now();
  await call;
  return { startedAt, ms: Date.now() - startedAt };
}

// ---- the resource, its row, its browsers ------------------------------------------------

interface PoolResource {
  metadata: { finalizers?: string[]; deletionTimestamp?: string };
  status?: { poolId?: string; availableCount?: number; conditions?: { type: string; status: string; reason: string }[] };
}

const poolPath = (name: string) => `/apis/${API_VERSION}/namespaces/${namespace}/${PLURALS.BrowserPool}/${name}`;

async function applyPool(name: string, labels: Record<string, string> = {}): Promise<void> {
  const manifest = { apiVersion: API_VERSION, kind: 'BrowserPool', metadata: { name, labels }, spec: { size: 1, headless: true } };
  const applied = await rawRequest('PATCH', `${poolPath(name)}?fieldManager=kubectl&fieldValidation=Strict`, manifest, 'application/apply-patch+yaml');
  expect(applied.status, JSON.stringify(applied.body)).toBeLessThan(300);
}

async function readPool(name: string): Promise<PoolResource | undefined> {
  const answer = await rawRequest('GET', poolPath(name));
  if (answer.status === 404) return undefined;
  if (answer.status !== 200) throw new Error(`reading BrowserPool ${name}: ${answer.status}`);
  return answer.body as unknown as PoolResource;
}

async function deletePool(name: string): Promise<void> {
  const deleted = await rawRequest('DELETE', poolPath(name), { apiVersion: 'v1', kind: 'DeleteOptions', propagationPolicy: 'Background' });
  expect(deleted.status).toBeLessThan(300);
}

const HOLD_STATUS_LABEL = 'test.browserplane.dev/hold-status';

/**
 * A ValidatingAdmissionPolicy refusing status writes to this namespace's BrowserPools that
 * carry HOLD_STATUS_LABEL: a reconcile then stops between its database work and its report.
 */
async function holdStatusWrites(): Promise<{ remove(): Promise<void> }> {
  const base = '/apis/admissionregistration.k8s.io/v1';
  const policy = `hold-pool-status-${namespace}`;
  const created = await rawRequest('POST', `${base}/validatingadmissionpolicies`, {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'ValidatingAdmissionPolicy',
    metadata: { name: policy },
    spec: {
      failurePolicy: 'Fail',
      matchConstraints: { resourceRules: [{ apiGroups: ['browserplane.dev'], apiVersions: ['*'], operations: ['UPDATE'], resources: ['browserpools/status'] }] },
      validations: [{ expression: `!has(object.metadata.labels) || !('${HOLD_STATUS_LABEL}' in object.metadata.labels)`, message: 'status writes are held by the test', reason: 'Forbidden' }],
    },
  });
  expect(created.status, JSON.stringify(created.body)).toBe(201);
  const bound = await rawRequest('POST', `${base}/validatingadmissionpolicybindings`, {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'ValidatingAdmissionPolicyBinding',
    metadata: { name: policy },
    spec: { policyName: policy, validationActions: ['Deny'], matchResources: { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': namespace } } } },
  });
  expect(bound.status, JSON.stringify(bound.body)).toBe(201);
  return {
    async remove() {
      await rawRequest('DELETE', `${base}/validatingadmissionpolicybindings/${policy}`);
      await rawRequest('DELETE', `${base}/validatingadmissionpolicies/${policy}`);
    },
  };
}

/** Whether a (dry-run) status write to the resource is refused: the policy takes effect a moment after it is created. */
const statusWriteRefused = (name: string) => async () =>
  (await rawRequest('PATCH', `${poolPath(name)}/status?dryRun=All`, { status: { observedGeneration: 0 } }, 'application/merge-patch+json')).status === 403;

const conditionOf = (resource: PoolResource | undefined, type: string) => resource?.status?.conditions?.find((c) => c.type === type);

/** Every pool row ever made for the resource, deleted ones included. */
async function poolRows(name: string): Promise<{ id: string; deleted: boolean; draining: boolean }[]> {
  const { rows } = await database.db.query<{ id: string; deleted: boolean; draining: boolean }>(
    'SELECT id, deleted_at IS NOT NULL AS deleted, draining_since IS NOT NULL AS draining FROM browser_pools WHERE kubernetes_resource = $1 ORDER BY created_at',
    [`${namespace}/${name}`],
  );
  return rows;
}

/** The session ids of the pool's BrowserSessions (each one a pod). */
async function poolSessionIds(poolId: string): Promise<string[]> {
  const selector = encodeURIComponent(`${LABELS.poolId}=${labelValue(poolId)}`);
  const list = (await rawRequest('GET', `/apis/${API_VERSION}/namespaces/${namespace}/${PLURALS.BrowserSession}?labelSelector=${selector}`)).body as {
    items: { metadata: { labels: Record<string, string> } }[];
  };
  return list.items.map((item) => item.metadata.labels[LABELS.sessionId]!);
}

async function podExists(sessionId: string): Promise<boolean> {
  return core.readNamespacedPod({ name: browserPodName(sessionId), namespace }).then(
    () => true,
    (error: { code?: number }) => {
      if (error.code === 404) return false;
      throw error;
    },
  );
}

/** Applies a pool of one and waits until the API reports its browser warm. */
async function filledPool(name: string): Promise<string> {
  await applyPool(name);
  const pool = await eventually(() => service.client().browserPools.retrieve(name).catch(() => undefined), { timeoutMs: 150_000, intervalMs: 150, what: `${name} filled`, accept: (p) => p?.available_count === 1 });
  return pool!.id;
}

/** Deletes the resource with a browser leased, and waits until the drain reports the lease it waits for. */
async function drainingWithLease(name: string): Promise<void> {
  await deletePool(name);
  const draining = await eventually(() => readPool(name), { timeoutMs: 30_000, intervalMs: 150, what: `${name} Draining with LeasesHeld`, accept: (r) => conditionOf(r, 'Draining')?.reason === 'LeasesHeld' });
  expect(draining!.metadata.deletionTimestamp).toBeDefined();
  expect(draining!.metadata.finalizers).toContain(FINALIZERS.browserPool);
  expect(conditionOf(draining, 'Draining')).toMatchObject({ status: 'True' });
  expect(await poolRows(name)).toEqual([expect.objectContaining({ deleted: false, draining: true })]);
}

/** What a finished drain leaves: no resource, the row deleted, no BrowserSession, no pod. */
async function drainedAway(name: string, poolId: string, sessionIds: string[]): Promise<void> {
  await eventually(() => readPool(name), { timeoutMs: 120_000, intervalMs: 150, what: `${name} gone`, accept: (r) => r === undefined });
  expect(await poolRows(name)).toEqual([{ id: poolId, deleted: true, draining: true }]);
  await expect(service.client().browserPools.retrieve(name)).rejects.toMatchObject({ status: 404 });
  await eventually(() => poolSessionIds(poolId), { timeoutMs: 60_000, intervalMs: 150, what: `${name}'s BrowserSessions gone`, accept: (ids) => ids.length === 0 });
  for (const id of sessionIds) await eventually(() => podExists(id), { timeoutMs: 60_000, intervalMs: 150, what: `pod of ${id} gone`, accept: (exists) => !exists });
}

describe('operator crashes in the middle of a BrowserPool reconcile', () => {
  it('leader SIGKILLed while a drain waits on a lease: the standby takes over and finishes the drain once the lease is released', async () => {
    const [a, b] = await leaderAndStandby('pool-operator-a', 'pool-operator-b');
    const name = 'drain-failover';
    const poolId = await filledPool(name);
    const client = service.client();
    const lease = await client.browserPools.acquire(name, { acquire_timeout_seconds: 30 });
    const sessionIds = await poolSessionIds(poolId);
    expect(sessionIds).toEqual([lease.session_id]);
    await drainingWithLease(name);

    const killedAt = await kill(a);
    // The lease ends while no operator leads: the drain can only finish under the new leader.
    // The release returns once the browser's BrowserSession is gone, which takes an operator.
    const released = timed(client.browserPools.release(name, { session_id: lease.session_id }));
    const takeover = await leading(b);
    console.log(`pool drain failover: standby leading ${takeover.at - killedAt} ms after the SIGKILL (lease 4 s)`);
    const { startedAt: releasedAt, ms: releaseMs } = await released;
    console.log(`pool drain failover: the release call took ${releaseMs} ms`);
    await drainedAway(name, poolId, sessionIds);
    console.log(`pool drain failover: resource gone ${Date.now() - releasedAt} ms after the release (${Date.now() - killedAt} ms after the SIGKILL)`);
    await finishedDrain(b, name);
    await stop(b);
  }, 420_000);

  it('leader SIGKILLed inside the first reconcile, finalizer added and the pool row not yet written: the new leader makes exactly one row, Ready, and fills it', async () => {
    const [a, b] = await leaderAndStandby('pool-operator-c', 'pool-operator-d');
    const name = 'create-failover';
    // Hold the project row: the leader's create (which share-locks its project) waits
    // inside its transaction, so the kill lands after the finalizer and before the row.
    const blocker = new pg.Client({ connectionString: database.url });
    await blocker.connect();
    let killedAt: number | undefined;
    try {
      await blocker.query('BEGIN');
      await blocker.query('SELECT p.id FROM projects p WHERE p.is_default AND p.org_id = (SELECT id FROM orgs ORDER BY created_at, id LIMIT 1) FOR UPDATE');
      await applyPool(name);
      await eventually(() => readPool(name), { timeoutMs: 30_000, intervalMs: 150, what: 'finalizer added', accept: (r) => r?.metadata.finalizers?.includes(FINALIZERS.browserPool) === true });
      const blockerPid = (await blocker.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
      await eventually(async () => (await database.db.query<{ n: number }>('SELECT count(*)::int AS n FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid)) AND query LIKE $2', [blockerPid, '%FROM projects%FOR SHARE%'])).rows[0]!.n, { timeoutMs: 30_000, intervalMs: 150, what: "the leader's create waiting on the project", accept: (n) => n > 0 });
      const atKill = await readPool(name);
      expect(atKill?.status, 'no status yet: the reconcile had not finished').toBeUndefined();
      killedAt = await kill(a);
    } finally {
      await blocker.query('ROLLBACK');
      await blocker.end();
    }
    expect(await poolRows(name), 'the killed leader wrote no row').toEqual([]);

    await leading(b);
    const ready = await eventually(() => readPool(name), { timeoutMs: 150_000, intervalMs: 150, what: `${name} Ready`, accept: (r) => conditionOf(r, 'Ready')?.status === 'True' });
    console.log(`pool create failover (no row yet): Ready ${Date.now() - killedAt} ms after the SIGKILL`);
    expect(conditionOf(ready, 'Ready')).toMatchObject({ reason: 'Full' });
    const rows = await poolRows(name);
    expect(rows).toEqual([{ id: ready!.status!.poolId, deleted: false, draining: false }]);
    expect(await service.client().browserPools.retrieve(name)).toMatchObject({ id: rows[0]!.id, available_count: 1 });

    const sessionIds = await poolSessionIds(rows[0]!.id);
    await deletePool(name);
    await drainedAway(name, rows[0]!.id, sessionIds);
    await stop(b);
  }, 420_000);

  it('leader SIGKILLed after its first reconcile wrote the pool row and before any status (status writes refused): the new leader keeps that row, makes no second one, and reports it Ready', async () => {
    const name = 'row-failover';
    const hold = await holdStatusWrites();
    try {
      // Applied before any operator runs, and checked refused, so the first reconcile meets the policy.
      await applyPool(name, { [HOLD_STATUS_LABEL]: 'true' });
      await eventually(statusWriteRefused(name), { timeoutMs: 30_000, intervalMs: 150, what: 'status writes refused by the admission policy', accept: (refused) => refused });
      const [a, b] = await leaderAndStandby('pool-operator-f', 'pool-operator-g');
      const [written] = await eventually(() => poolRows(name), { timeoutMs: 60_000, intervalMs: 150, what: "the leader's pool row", accept: (rows) => rows.length > 0 });
      await a.waitFor((line) => line.msg === 'reconcile failed; retrying with backoff' && line.resource === `${namespace}/${name}` && /HTTP-Code: 403/.test(line.err?.message ?? ''), 'a refused status write', 60_000);
      expect((await readPool(name))?.status, 'no status: the reconcile never finished').toBeUndefined();
      const killedAt = await kill(a);

      await applyPool(name);
      await leading(b);
      const ready = await eventually(() => readPool(name), { timeoutMs: 150_000, intervalMs: 150, what: `${name} Ready`, accept: (r) => conditionOf(r, 'Ready')?.status === 'True' });
      console.log(`pool create failover (row written): Ready ${Date.now() - killedAt} ms after the SIGKILL`);
      expect(ready!.status!.poolId).toBe(written!.id);
      expect(await poolRows(name)).toEqual([{ id: written!.id, deleted: false, draining: false }]);

      const sessionIds = await poolSessionIds(written!.id);
      await deletePool(name);
      await drainedAway(name, written!.id, sessionIds);
      await stop(b);
    } finally {
      await hold.remove();
    }
  }, 420_000);

  it('a single operator SIGKILLed mid-drain and started again (a container restart, same identity) finishes the drain', async () => {
    const first = startOperator('pool-operator-e');
    await leading(first);
    const name = 'drain-restart';
    const poolId = await filledPool(name);
    const client = service.client();
    const lease = await client.browserPools.acquire(name, { acquire_timeout_seconds: 30 });
    const sessionIds = await poolSessionIds(poolId);
    await drainingWithLease(name);

    const killedAt = await kill(first);
    const released = timed(client.browserPools.release(name, { session_id: lease.session_id }));
    // The same identity renews its own Lease at once: no lease duration to wait out.
    const restarted = startOperator('pool-operator-e');
    const takeover = await leading(restarted);
    console.log(`pool drain restart: new process leading ${takeover.at - killedAt} ms after the SIGKILL`);
    const { startedAt: releasedAt, ms: releaseMs } = await released;
    console.log(`pool drain restart: the release call took ${releaseMs} ms`);
    await drainedAway(name, poolId, sessionIds);
    console.log(`pool drain restart: resource gone ${Date.now() - releasedAt} ms after the release`);
    await finishedDrain(restarted, name);
    await stop(restarted);
  }, 420_000);
});
