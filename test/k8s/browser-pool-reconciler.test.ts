import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../api/src/clock.js';
import { ANNOTATIONS, API_VERSION, FINALIZERS, LABELS, PLURALS } from '../../contract/kinds.js';
import { startBrowserPoolReconciler } from '../../operator/src/reconcilers/browser-pool.js';
import { DRAINING_REASONS, READY_REASONS } from '../../operator/src/reconcilers/browser-pool-plan.js';
import { eventually } from '../support/eventually.js';
import { markerZip, uploadForm } from '../support/extension-zip.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { freshNamespace, installCrds, kubeConfig, rawRequest } from './support/kube.js';

/**
 * GitOps pools, end to end: a real API server, real Postgres, the API app in-process with
 * its pool fill running (real local Chromium), and the BrowserPool reconciler in-process.
 * Resources are applied and deleted as kubectl does it (server-side apply, field manager
 * "kubectl"); the pool is checked through the API and in the database.
 */

const WAIT_MS = 150_000;
/** Chromium starts slowly on a busy machine: a test may wait on several launches. */
const TEST_MS = 400_000;

let app: TestApp;
let namespace: string;
const stop = new AbortController();
let reconciler: Promise<void> | undefined;

beforeAll(async () => {
  await installCrds();
  namespace = await freshNamespace('bpool');
  app = await startTestApp({
    clock: systemClock,
    settings: { orgMaxConcurrentSessions: 50 },
    background: { reaperIntervalMs: 250, poolIntervalMs: 250 },
  });
  reconciler = startBrowserPoolReconciler({ config: kubeConfig(), namespace, deps: app.deps, pools: app.services.pools, workers: 2, signal: stop.signal }).done;
}, 120_000);

afterAll(async () => {
  stop.abort();
  await reconciler;
  await app?.close();
}, 120_000);

const resourcePath = (name?: string) => `/apis/${API_VERSION}/namespaces/${namespace}/${PLURALS.BrowserPool}${name ? `/${name}` : ''}`;

/** kubectl apply --server-side. */
async function apply(name: string, spec: Record<string, unknown>, metadata: Record<string, unknown> = {}): Promise<void> {
  const answer = await rawRequest(
    'PATCH',
    `${resourcePath(name)}?fieldManager=kubectl&fieldValidation=Strict`,
    { apiVersion: API_VERSION, kind: 'BrowserPool', metadata: { name, ...metadata }, spec },
    'application/apply-patch+yaml',
  );
  if (answer.status >= 300) throw new Error(`apply ${name}: ${answer.status} ${JSON.stringify(answer.body)}`);
}

/** kubectl delete (without waiting). */
async function kubectlDelete(name: string): Promise<void> {
  const answer = await rawRequest('DELETE', resourcePath(name), { apiVersion: 'v1', kind: 'DeleteOptions', propagationPolicy: 'Background' });
  if (answer.status >= 300) throw new Error(`delete ${name}: ${answer.status} ${JSON.stringify(answer.body)}`);
}

interface BrowserPoolObject {
  metadata: { generation: number; finalizers?: string[]; deletionTimestamp?: string };
  status?: {
    poolId?: string;
    project?: string;
    size?: number;
    availableCount?: number;
    acquiredCount?: number;
    replicas?: number;
    selector?: string;
    observedGeneration?: number;
    conditions?: { type: string; status: string; reason: string; message: string; observedGeneration?: number }[];
  };
}

async function getResource(name: string): Promise<BrowserPoolObject | undefined> {
  const answer = await rawRequest('GET', resourcePath(name));
  if (answer.status === 404) return undefined;
  if (answer.status >= 300) throw new Error(`get ${name}: ${answer.status}`);
  return answer.body as unknown as BrowserPoolObject;
}

const conditionOf = (object: BrowserPoolObject | undefined, type: string) => object?.status?.conditions?.find((c) => c.type === type);

/** A resource whose status reports Ready with this reason for its current generation. */
function readyWith(name: string, reason: string): Promise<BrowserPoolObject> {
  return eventually(
    async () => {
      const object = await getResource(name);
      const ready = conditionOf(object, 'Ready');
      return ready?.reason === reason && ready.observedGeneration === object!.metadata.generation && object!.status?.observedGeneration === object!.metadata.generation && object;
    },
    { timeoutMs: WAIT_MS, intervalMs: 200, what: `${name} Ready reason ${reason}`, retryErrors: true },
  );
}

interface PoolRow {
  id: string;
  size: number;
  viewport_width: number;
  generation: number;
  kubernetes_resource: string | null;
  deleted_at: Date | null;
  draining_since: Date | null;
}

async function poolRow(id: string): Promise<PoolRow> {
  const { rows } = await app.deps.db.query<PoolRow>(
    'SELECT id, size, viewport_width, generation, kubernetes_resource, deleted_at, draining_since FROM browser_pools WHERE id = $1',
    [id],
  );
  return rows[0]!;
}

async function poolBrowsers(id: string) {
  const { rows } = await app.deps.db.query<{ id: string; pool_generation: number; viewport_width: number; leased_at: Date | null; deleted_at: Date | null }>(
    'SELECT id, pool_generation, viewport_width, leased_at, deleted_at FROM browser_sessions WHERE pool_id = $1',
    [id],
  );
  return rows;
}

describe('BrowserPool resources applied with kubectl', () => {
  it('appear in the API and fill; the API refuses to change them; a changed spec reaches the pool; an invalid one changes nothing', async () => {
    const http = app.tenant.http;
    await apply('warm', { size: 2, headless: true, fillRatePerMinute: 6000 });

    const full = await readyWith('warm', READY_REASONS.full);
    const poolId = full.status!.poolId!;
    expect(full.metadata.finalizers).toContain(FINALIZERS.browserPool);
    expect(full.status).toMatchObject({ project: app.tenant.defaultProjectId, size: 2, availableCount: 2, acquiredCount: 0, startingCount: 0 });
    const listed = await http.get(`/browser_pools?name=warm`);
    expect(listed.body).toEqual([expect.objectContaining({ id: poolId, name: 'warm', available_count: 2, acquired_count: 0 })]);
    expect((await poolRow(poolId)).kubernetes_resource).toBe(`${namespace}/warm`);

    // The API may not change or delete what the resource manages, and changes nothing trying.
    for (const refused of [await http.patch(`/browser_pools/${poolId}`, { size: 3 }), await http.delete(`/browser_pools/warm`, { force: true })]) {
      expect(refused.status).toBe(409);
      expect(refused.body.code).toBe('pool_managed_by_kubernetes');
      expect(refused.body.details).toEqual([expect.objectContaining({ message: `BrowserPool ${namespace}/warm` })]);
    }
    expect(await http.get(`/browser_pools/${poolId}`)).toMatchObject({ status: 200, body: { browser_pool_config: { size: 2 } } });

    // Another organisation's key neither sees nor touches it.
    const other = await app.newTenant('other');
    expect((await other.http.get(`/browser_pools/${poolId}`)).status).toBe(404);
    expect((await other.http.get('/browser_pools')).body).toEqual([]);
    expect((await other.http.patch(`/browser_pools/${poolId}`, { size: 1 })).status).toBe(404);
    expect((await other.http.delete(`/browser_pools/${poolId}`, {})).status).toBe(404);
    expect((await other.http.post(`/browser_pools/${poolId}/acquire`, { acquire_timeout_seconds: 0 })).status).toBe(404);

    // A new spec: one smaller browser of another size; the idle ones of the old configuration are rebuilt.
    const before = await poolRow(poolId);
    await apply('warm', { size: 1, headless: true, fillRatePerMinute: 6000, viewport: { width: 1280, height: 720 } });
    const changed = await eventually(
      async () => {
        const row = await poolRow(poolId);
        return row.size === 1 && row.viewport_width === 1280 && row;
      },
      { timeoutMs: WAIT_MS, intervalMs: 200, what: 'the new spec in the pool row', retryErrors: true },
    );
    expect(changed.generation).toBeGreaterThan(before.generation);
    await eventually(
      async () => {
        const live = (await poolBrowsers(poolId)).filter((b) => b.deleted_at === null);
        const object = await getResource('warm');
        return (
          live.length === 1 &&
          live.every((b) => b.pool_generation === changed.generation && b.viewport_width === 1280) &&
          conditionOf(object, 'Ready')?.reason === READY_REASONS.full &&
          object!.status?.observedGeneration === object!.metadata.generation &&
          object!.status?.availableCount === 1
        );
      },
      { timeoutMs: WAIT_MS, intervalMs: 200, what: 'the pool full again with browsers of the new configuration', retryErrors: true },
    );

    // An invalid spec (a name Chrome has no policy for: the CRD cannot tell, the API's schema can).
    await apply('warm', { size: 2, headless: true, chromePolicy: { 'Not a policy!': true } });
    const invalid = await readyWith('warm', READY_REASONS.invalidSpec);
    expect(conditionOf(invalid, 'Ready')?.message).toMatch(/is not a Chrome policy name/);
    expect(await poolRow(poolId)).toMatchObject({ size: 1, viewport_width: 1280, generation: changed.generation, deleted_at: null });
    expect(invalid.status).toMatchObject({ poolId, size: 1 });
  }, TEST_MS);

  it('kubectl scale (the scale subresource, as an HPA or KEDA uses it) resizes the pool; its status says the replicas and the pods\' selector', async () => {
    await apply('scaled', { size: 1, headless: true, fillRatePerMinute: 6000 });
    const full = await readyWith('scaled', READY_REASONS.full);
    const poolId = full.status!.poolId!;
    const scale = await rawRequest('GET', `${resourcePath('scaled')}/scale`);
    expect(scale.body).toMatchObject({ spec: { replicas: 1 }, status: { replicas: 1, selector: `${LABELS.poolId}=${poolId}` } });
    const scaled = await rawRequest('PATCH', `${resourcePath('scaled')}/scale`, { spec: { replicas: 2 } }, 'application/merge-patch+json');
    expect(scaled.status).toBe(200);
    await eventually(
      async () => {
        const object = await getResource('scaled');
        return (await poolRow(poolId)).size === 2 && object?.status?.replicas === 2 && conditionOf(object, 'Ready')?.reason === READY_REASONS.full;
      },
      { timeoutMs: WAIT_MS, intervalMs: 200, what: 'the pool at 2 browsers, as its status says', retryErrors: true },
    );
    await kubectlDelete('scaled');
    await eventually(async () => (await getResource('scaled')) === undefined, { timeoutMs: WAIT_MS, intervalMs: 200, what: 'scaled gone' });
  }, TEST_MS);

  it('a pool naming an uploaded extension of its project loads it; dropping it from the spec clears it', async () => {
    const http = app.tenant.http;
    const upload = await fetch(`${http.baseUrl}/extensions`, { method: 'POST', headers: { ...http.extraHeaders, authorization: `Bearer ${http.key}` }, body: uploadForm(await markerZip(), 'gitops-marker') });
    const extension = (await upload.json()) as { id: string };
    expect(upload.status).toBe(200);
    await apply('with-ext', { size: 1, headless: true, fillRatePerMinute: 6000, extensions: [{ name: 'gitops-marker' }] });
    const full = await readyWith('with-ext', READY_REASONS.full);
    const poolId = full.status!.poolId!;
    expect((await http.get(`/browser_pools/${poolId}`)).body).toMatchObject({ extension_ids: [extension.id] });
    // Held by the pool: the extension cannot be deleted under it.
    expect((await http.delete(`/extensions/${extension.id}`)).status).toBe(409);

    await apply('with-ext', { size: 1, headless: true, fillRatePerMinute: 6000 });
    await eventually(async () => ((await http.get(`/browser_pools/${poolId}`)).body as { extension_ids: string[] }).extension_ids.length === 0, {
      timeoutMs: WAIT_MS,
      intervalMs: 200,
      what: 'the extension dropped from the pool',
    });
    await kubectlDelete('with-ext');
    await eventually(async () => (await getResource('with-ext')) === undefined, { timeoutMs: WAIT_MS, intervalMs: 200, what: 'with-ext gone' });
  }, TEST_MS);

  it('kubectl delete drains the pool: idle browsers end, a leased one is waited for, then the pool and the resource go', async () => {
    const http = app.tenant.http;
    await apply('drain', { size: 2, headless: true, fillRatePerMinute: 6000 });
    const full = await readyWith('drain', READY_REASONS.full);
    const poolId = full.status!.poolId!;
    const lease = await http.post(`/browser_pools/${poolId}/acquire`, { acquire_timeout_seconds: 30 });
    expect(lease.status).toBe(200);
    const leasedId = lease.body.session_id as string;

    await kubectlDelete('drain');
    const draining = await eventually(
      async () => {
        const object = await getResource('drain');
        const condition = conditionOf(object, 'Draining');
        return condition?.reason === DRAINING_REASONS.leasesHeld && object!.status?.availableCount === 0 && object;
      },
      { timeoutMs: WAIT_MS, intervalMs: 200, what: 'Draining with the lease held', retryErrors: true },
    );
    expect(conditionOf(draining, 'Draining')).toMatchObject({ status: 'True', message: 'waiting for 1 leased browser to be released' });
    expect(draining.metadata.finalizers).toContain(FINALIZERS.browserPool);
    expect(draining.metadata.deletionTimestamp).toBeDefined();
    // The pool is still there, leased, and warms nothing new while it drains.
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    expect(await http.get(`/browser_pools/${poolId}`)).toMatchObject({ status: 200, body: { acquired_count: 1, available_count: 0 } });
    const live = (await poolBrowsers(poolId)).filter((b) => b.deleted_at === null);
    expect(live.map((b) => b.id)).toEqual([leasedId]);
    expect((await poolRow(poolId)).draining_since).not.toBeNull();
    expect((await http.get(`/browsers/${leasedId}`)).status).toBe(200);

    const released = await http.post(`/browser_pools/${poolId}/release`, { session_id: leasedId });
    expect(released.status).toBe(204);
    // Closed on release, not reset and put back where an acquire could lease it again.
    const { rows } = await app.deps.db.query<{ deleted_reason: string | null }>('SELECT deleted_reason FROM browser_sessions WHERE id = $1', [leasedId]);
    expect(rows[0]!.deleted_reason).toBe('pool_released');
    await eventually(async () => (await getResource('drain')) === undefined, { timeoutMs: WAIT_MS, intervalMs: 200, what: 'the resource gone', retryErrors: true });
    expect((await poolRow(poolId)).deleted_at).not.toBeNull();
    expect((await http.get(`/browser_pools/${poolId}`)).status).toBe(404);
    expect((await poolBrowsers(poolId)).every((b) => b.deleted_at !== null)).toBe(true);
    const ids = new Set((await poolBrowsers(poolId)).map((b) => b.id));
    await eventually(async () => (await app.runtime.list()).every((b) => !ids.has(b.browserId) || b.phase !== 'Ready'), { timeoutMs: WAIT_MS, intervalMs: 200, what: 'every browser of the pool closed', retryErrors: true });
  }, TEST_MS);

  it('kubectl delete of a pool annotated force-delete ends its leased browser at once, as an API DELETE with force does', async () => {
    const http = app.tenant.http;
    await apply('forced', { size: 1, headless: true, fillRatePerMinute: 6000 });
    const full = await readyWith('forced', READY_REASONS.full);
    const poolId = full.status!.poolId!;
    const lease = await http.post(`/browser_pools/${poolId}/acquire`, { acquire_timeout_seconds: 30 });
    expect(lease.status).toBe(200);
    const leasedId = lease.body.session_id as string;

    await apply('forced', { size: 1, headless: true, fillRatePerMinute: 6000 }, { annotations: { [ANNOTATIONS.forceDelete]: 'true' } });
    await kubectlDelete('forced');

    // No release: the lease is ended for its holder, the pool and the resource go.
    await eventually(async () => (await getResource('forced')) === undefined, { timeoutMs: 60_000, intervalMs: 200, what: 'the resource gone', retryErrors: true });
    const { rows } = await app.deps.db.query<{ deleted_reason: string | null }>('SELECT deleted_reason FROM browser_sessions WHERE id = $1', [leasedId]);
    expect(rows[0]!.deleted_reason).toBe('pool_deleted');
    expect((await http.get(`/browsers/${leasedId}`)).status).toBe(404);
    expect((await poolRow(poolId)).deleted_at).not.toBeNull();
    expect((await http.get(`/browser_pools/${poolId}`)).status).toBe(404);
    await eventually(async () => (await app.runtime.list()).every((b) => b.browserId !== leasedId || b.phase !== 'Ready'), { timeoutMs: WAIT_MS, intervalMs: 200, what: 'the leased browser closed', retryErrors: true });
  }, TEST_MS);

  it('takes no pool over: a name an API pool holds is a NameConflict, an unknown project a ProjectNotFound; deleting either releases its finalizer', async () => {
    const http = app.tenant.http;
    const apiPool = await http.post('/browser_pools', { name: 'taken', size: 1, headless: true });
    expect(apiPool.status).toBe(200);
    await apply('claims-taken', { size: 1, headless: true, name: 'taken' });
    const conflict = await readyWith('claims-taken', READY_REASONS.nameConflict);
    expect(conditionOf(conflict, 'Ready')?.message).toContain(apiPool.body.id);
    expect(conflict.status?.poolId).toBeUndefined();
    expect((await poolRow(apiPool.body.id)).kubernetes_resource).toBeNull();
    // Still the API's own: it changes through the API.
    expect((await http.patch(`/browser_pools/${apiPool.body.id}`, { timeout_seconds: 60 })).status).toBe(200);

    await apply('lost', { size: 1, headless: true, project: 'no-such-project' });
    const lost = await readyWith('lost', READY_REASONS.projectNotFound);
    expect(conditionOf(lost, 'Ready')?.message).toContain('no-such-project');

    await kubectlDelete('claims-taken');
    await kubectlDelete('lost');
    await eventually(async () => (await getResource('claims-taken')) === undefined && (await getResource('lost')) === undefined, { timeoutMs: WAIT_MS, intervalMs: 200, what: 'both resources gone', retryErrors: true });
    expect((await poolRow(apiPool.body.id)).deleted_at).toBeNull();
    expect((await http.delete(`/browser_pools/${apiPool.body.id}`, { force: true })).status).toBe(204);
  }, TEST_MS);
});
