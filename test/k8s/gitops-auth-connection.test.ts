import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../api/src/clock.js';
import { API_VERSION, PLURALS } from '../../contract/kinds.js';
import { EventsV1Api } from '@kubernetes/client-node';
import { createEventRecorder } from '../../operator/src/k8s/event-recorder.js';
import { startAuthConnectionReconciler } from '../../operator/src/reconcilers/auth-connection.js';
import { REPORTING_CONTROLLER } from '../../operator/src/reconcilers/transition-events.js';
import { AUTH_CONNECTION_FINALIZER, READY_REASONS } from '../../operator/src/reconcilers/auth-connection-plan.js';
import { PASSWORD, startLoginSites, USERNAME, type LoginSites } from '../fixtures/login-sites/server.js';
import { eventually } from '../support/eventually.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { writeKubeconfig } from './support/helm.js';
import { freshNamespace, installCrds, kubeConfig, rawRequest } from './support/kube.js';
import { BROWSER_IMAGE_REPOSITORY } from './support/node-agent.js';
import { assertOperatorBuilt, OPERATOR_LEASE_TIMINGS_UNSET, startOperatorProcess } from './support/operator-process.js';

/**
 * GitOps auth connections, end to end: a real API server, real Postgres, the API app
 * in-process (its login flows drive real local Chromium on the fixture login sites), and
 * the AuthConnection reconciler in-process. Resources are applied and deleted as kubectl
 * does it (server-side apply, field manager "kubectl"); the connection is checked through
 * the API and in the database, its auth state in the resource's status.
 */

const WAIT_MS = 120_000;
const TEST_MS = 300_000;

let app: TestApp;
let sites: LoginSites;
let namespace: string;
const stop = new AbortController();
let reconciler: Promise<void> | undefined;

beforeAll(async () => {
  await installCrds();
  namespace = await freshNamespace('authconn');
  sites = await startLoginSites();
  app = await startTestApp({ clock: systemClock });
  // No resync here: a status that follows a login quickly can only have been woken by the event hub.
  const events = createEventRecorder({ config: kubeConfig(), reportingController: REPORTING_CONTROLLER, reportingInstance: 'authconn-test', log: { debug: () => {}, warn: () => {} } });
  reconciler = startAuthConnectionReconciler({ config: kubeConfig(), namespace, deps: app.deps, workers: 2, signal: stop.signal, events }).done;
}, 120_000);

afterAll(async () => {
  stop.abort();
  await reconciler;
  await app?.close();
  await sites?.close();
}, 120_000);

const resourcePath = (name?: string, ns = namespace) => `/apis/${API_VERSION}/namespaces/${ns}/${PLURALS.AuthConnection}${name ? `/${name}` : ''}`;

/** kubectl apply --server-side. */
async function apply(name: string, spec: Record<string, unknown>, ns = namespace): Promise<void> {
  const answer = await rawRequest(
    'PATCH',
    `${resourcePath(name, ns)}?fieldManager=kubectl&fieldValidation=Strict`,
    { apiVersion: API_VERSION, kind: 'AuthConnection', metadata: { name }, spec },
    'application/apply-patch+yaml',
  );
  if (answer.status >= 300) throw new Error(`apply ${name}: ${answer.status} ${JSON.stringify(answer.body)}`);
}

/** kubectl delete (without waiting). */
async function kubectlDelete(name: string, ns = namespace): Promise<void> {
  const answer = await rawRequest('DELETE', resourcePath(name, ns), { apiVersion: 'v1', kind: 'DeleteOptions', propagationPolicy: 'Background' });
  if (answer.status >= 300) throw new Error(`delete ${name}: ${answer.status} ${JSON.stringify(answer.body)}`);
}

interface Condition {
  type: string;
  status: string;
  reason: string;
  message: string;
  observedGeneration?: number;
}

interface AuthConnectionObject {
  metadata: { generation: number; finalizers?: string[] };
  status?: Record<string, unknown> & { connectionId?: string; observedGeneration?: number; conditions?: Condition[] };
}

async function getResource(name: string, ns = namespace): Promise<AuthConnectionObject | undefined> {
  const answer = await rawRequest('GET', resourcePath(name, ns));
  if (answer.status === 404) return undefined;
  if (answer.status >= 300) throw new Error(`get ${name}: ${answer.status}`);
  return answer.body as unknown as AuthConnectionObject;
}

const readyOf = (object: AuthConnectionObject | undefined) => object?.status?.conditions?.find((c) => c.type === 'Ready');

/** A resource whose status reports Ready with this reason for its current generation. */
function readyWith(name: string, reason: string, timeoutMs = WAIT_MS): Promise<AuthConnectionObject> {
  return eventually(
    async () => {
      const object = await getResource(name);
      const ready = readyOf(object);
      return ready?.reason === reason && ready.observedGeneration === object!.metadata.generation && object!.status?.observedGeneration === object!.metadata.generation && object;
    },
    { timeoutMs: timeoutMs, intervalMs: 200, what: `${name} Ready reason ${reason}`, retryErrors: true },
  );
}

interface ConnectionRow {
  id: string;
  domain: string;
  health_check_interval: number;
  health_checks: boolean;
  kubernetes_resource: string | null;
}

async function connectionRows(where: { resource: string } | { id: string }): Promise<ConnectionRow[]> {
  const [column, value] = 'resource' in where ? ['kubernetes_resource', where.resource] : ['id', where.id];
  const { rows } = await app.deps.db.query<ConnectionRow>(
    `SELECT id, domain, health_check_interval, health_checks, kubernetes_resource FROM auth_connections WHERE ${column} = $1`,
    [value],
  );
  return rows;
}

/** The connection's scheduled health check, as graphile-worker holds it. */
async function healthCheckRunAt(id: string): Promise<Date | undefined> {
  const { rows } = await app.deps.db.query<{ run_at: Date }>('SELECT run_at FROM graphile_worker.jobs WHERE key = $1', [`auth-health:${id}`]);
  return rows[0]?.run_at;
}

describe('AuthConnection resources applied with kubectl', () => {
  it('appear in the API, follow spec changes, refuse API changes, report a login through the API, and go on kubectl delete', async () => {
    const http = app.tenant.http;
    const credential = await http.post('/credentials', { name: 'single-cred', domain: sites.domain('single'), values: { username: USERNAME, password: PASSWORD } });
    expect(credential.status, credential.text).toBe(200);
    await apply('single', { domain: sites.domain('single'), profileName: 'gitops-single', loginUrl: sites.url('single', '/login'), credential: { name: 'single-cred' }, healthCheckInterval: 600 });

    const made = await readyWith('single', READY_REASONS.needsAuth);
    const id = made.status!.connectionId!;
    expect(made.metadata.finalizers).toContain(AUTH_CONNECTION_FINALIZER);
    expect(made.status).toMatchObject({ project: app.tenant.defaultProjectId, status: 'NEEDS_AUTH', canReauth: true });
    expect(made.status).not.toHaveProperty('flowStatus');
    const listed = await http.get('/auth/connections');
    expect(listed.body).toEqual([expect.objectContaining({ id, domain: sites.domain('single'), profile_name: 'gitops-single', health_check_interval: 600 })]);
    expect(await connectionRows({ id })).toEqual([expect.objectContaining({ kubernetes_resource: `${namespace}/single` })]);
    // Made through the API's create: its first health check was scheduled with it.
    const firstCheck = await healthCheckRunAt(id);
    expect(firstCheck!.getTime() - Date.now()).toBeGreaterThan(500_000);

    // A changed spec reaches the row, and the schedule with it.
    await apply('single', { domain: sites.domain('single'), profileName: 'gitops-single', loginUrl: sites.url('single', '/login'), credential: { name: 'single-cred' }, healthCheckInterval: 900 });
    await eventually(async () => (await connectionRows({ id }))[0]?.health_check_interval === 900, { timeoutMs: WAIT_MS, intervalMs: 200, what: 'the new interval in the row', retryErrors: true });
    expect((await healthCheckRunAt(id))!.getTime() - Date.now()).toBeGreaterThan(800_000);
    await readyWith('single', READY_REASONS.needsAuth);

    // The API may not change or delete what the resource manages, and changes nothing trying.
    for (const refused of [await http.patch(`/auth/connections/${id}`, { health_check_interval: 3600 }), await http.delete(`/auth/connections/${id}`)]) {
      expect(refused.status, refused.text).toBe(409);
      expect(refused.body.code).toBe('auth_connection_managed_by_kubernetes');
      expect(refused.body.message).toContain(`${namespace}/single`);
    }
    expect(await http.get(`/auth/connections/${id}`)).toMatchObject({ status: 200, body: { health_check_interval: 900 } });

    // Another organisation's key neither sees nor touches it.
    const other = await app.newTenant('other');
    expect((await other.http.get(`/auth/connections/${id}`)).status).toBe(404);
    expect((await other.http.get('/auth/connections')).body).toEqual([]);
    expect((await other.http.post(`/auth/connections/${id}/login`, {})).status).toBe(404);

    // A login through the API (allowed: it changes the auth state, not the manifest's settings).
    // The status is steady now (next fallback requeue a minute away): catching the flow
    // within seconds needs the connection's notifications.
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    const login = await http.post(`/auth/connections/${id}/login`, {});
    expect(login.status, login.text).toBe(200);
    await eventually(async () => (await getResource('single'))?.status?.flowType === 'LOGIN', { timeoutMs: 20_000, intervalMs: 200, what: 'the login flow in the status', retryErrors: true });
    const authenticated = await readyWith('single', READY_REASONS.authenticated);
    expect(authenticated.status).toMatchObject({ connectionId: id, status: 'AUTHENTICATED', flowStatus: 'SUCCESS', flowStep: 'COMPLETED', flowType: 'LOGIN', lastAuthCheckAt: expect.any(String) });
    expect(readyOf(authenticated)?.status).toBe('True');
    // Nothing secret in the status: not the hosted page's hand-off code, not the password.
    const text = JSON.stringify(authenticated);
    expect(text).not.toContain(login.body.handoff_code as string);
    expect(text).not.toContain('/auth/hosted/');
    expect(text).not.toContain(PASSWORD);
    expect(await http.get(`/auth/connections/${id}`)).toMatchObject({ body: { status: 'AUTHENTICATED', flow_status: 'SUCCESS' } });
    // kubectl describe tells the story: the login started, then it succeeded.
    await eventually(
      async () => {
        const reasons = (await kubeConfig().makeApiClient(EventsV1Api).listNamespacedEvent({ namespace })).items
          .filter((event) => event.regarding?.kind === 'AuthConnection' && event.regarding.name === 'single')
          .map((event) => event.reason);
        return reasons.includes(READY_REASONS.loginInProgress) && reasons.includes(READY_REASONS.authenticated);
      },
      { timeoutMs: 20_000, intervalMs: 200, what: 'the Authenticated event', retryErrors: true },
    );

    // kubectl delete: the connection goes, its health check with it, and the finalizer is released.
    await kubectlDelete('single');
    await eventually(async () => (await getResource('single')) === undefined, { timeoutMs: WAIT_MS, intervalMs: 200, what: 'the resource gone', retryErrors: true });
    expect(await connectionRows({ id })).toEqual([]);
    expect((await http.get(`/auth/connections/${id}`)).status).toBe(404);
    expect(await healthCheckRunAt(id)).toBeUndefined();
  }, TEST_MS);

  it('an invalid spec is InvalidSpec with the API’s message and creates nothing', async () => {
    await apply('no-cred', { domain: sites.domain('twostep'), profileName: 'gitops-nocred', credential: { name: 'does-not-exist' } });
    const missing = await readyWith('no-cred', READY_REASONS.invalidSpec);
    expect(readyOf(missing)).toMatchObject({ status: 'False', message: 'not_found: Credential "does-not-exist" was not found' });
    expect(missing.status).not.toHaveProperty('connectionId');

    await apply('too-often', { domain: sites.domain('twostep'), profileName: 'gitops-often', healthCheckInterval: 10 });
    const often = await readyWith('too-often', READY_REASONS.invalidSpec);
    expect(readyOf(often)?.message).toMatch(/health_check_interval must be at least 300 seconds/);

    expect(await connectionRows({ resource: `${namespace}/no-cred` })).toEqual([]);
    expect(await connectionRows({ resource: `${namespace}/too-often` })).toEqual([]);
    expect((await app.tenant.http.get(`/auth/connections?domain=${sites.domain('twostep')}`)).body).toEqual([]);

    await kubectlDelete('no-cred');
    await kubectlDelete('too-often');
    await eventually(async () => (await getResource('no-cred')) === undefined && (await getResource('too-often')) === undefined, { timeoutMs: WAIT_MS, intervalMs: 200, what: 'both resources gone', retryErrors: true });
  }, TEST_MS);

  it('takes no connection over: the same domain and profile as an API connection is a NameConflict; deleting the resource leaves it', async () => {
    const http = app.tenant.http;
    const apiMade = await http.post('/auth/connections', { domain: sites.domain('landing'), profile_name: 'shared-profile', health_checks: false });
    expect(apiMade.status, apiMade.text).toBe(200);
    await apply('claims', { domain: sites.domain('landing'), profileName: 'Shared-Profile' });
    const conflict = await readyWith('claims', READY_REASONS.nameConflict);
    expect(readyOf(conflict)?.message).toContain(apiMade.body.id as string);
    expect(conflict.status).not.toHaveProperty('connectionId');
    expect(await connectionRows({ id: apiMade.body.id as string })).toEqual([expect.objectContaining({ kubernetes_resource: null })]);
    // Still the API's own: it changes through the API.
    expect((await http.patch(`/auth/connections/${apiMade.body.id}`, { health_checks: true })).status).toBe(200);

    await kubectlDelete('claims');
    await eventually(async () => (await getResource('claims')) === undefined, { timeoutMs: WAIT_MS, intervalMs: 200, what: 'the resource gone', retryErrors: true });
    expect((await http.get(`/auth/connections/${apiMade.body.id}`)).status).toBe(200);
    expect((await http.delete(`/auth/connections/${apiMade.body.id}`)).status).toBe(204);
  }, TEST_MS);
});

describe('the built operator process', () => {
  it('runs the AuthConnection reconciler when it has DATABASE_URL: apply makes the connection, kubectl delete removes it', async () => {
    assertOperatorBuilt();
    const ns = await freshNamespace('authconn-op');
    const dataDir = await mkdtemp(path.join(os.tmpdir(), 'authconn-operator-'));
    const operator = startOperatorProcess({
      kubeconfig: writeKubeconfig(),
      namespace: ns,
      identity: 'operator-authconn',
      databaseUrl: app.database.url,
      env: {
        ...OPERATOR_LEASE_TIMINGS_UNSET,
        BROWSERPLANE_BROWSER_LAUNCH_TIMEOUT_MS: undefined,
        BROWSERPLANE_BROWSER_TERMINATE_GRACE_MS: undefined,
        BROWSERPLANE_OPERATOR_RESYNC_SECONDS: undefined,
        BROWSERPLANE_DATA_DIR: dataDir,
        BROWSERPLANE_BROWSER_POD: JSON.stringify({ image: `${BROWSER_IMAGE_REPOSITORY}:test`, imagePullPolicy: 'IfNotPresent' }),
      },
      stderr: 'lines',
    });
    try {
      await apply('from-process', { domain: sites.domain('totp'), profileName: 'process-made', healthChecks: false }, ns);
      const made = await eventually(
        async () => {
          const object = await getResource('from-process', ns);
          return readyOf(object)?.reason === READY_REASONS.needsAuth && object!.status?.connectionId !== undefined && object;
        },
        { timeoutMs: WAIT_MS, intervalMs: 200, what: 'the operator process to report the connection', retryErrors: true },
      ).catch((error: unknown) => {
        throw new Error(`${error instanceof Error ? error.message : String(error)}\n--- operator\n${operator.logTail()}`);
      });
      const id = made.status!.connectionId!;
      expect(await app.tenant.http.get(`/auth/connections/${id}`)).toMatchObject({ status: 200, body: { domain: sites.domain('totp'), profile_name: 'process-made', health_checks: false } });
      expect(await connectionRows({ id })).toEqual([expect.objectContaining({ kubernetes_resource: `${ns}/from-process` })]);

      await kubectlDelete('from-process', ns);
      await eventually(async () => (await getResource('from-process', ns)) === undefined, { timeoutMs: WAIT_MS, intervalMs: 200, what: 'the resource gone', retryErrors: true });
      expect(await connectionRows({ id })).toEqual([]);
    } finally {
      if (operator.child.exitCode === null) {
        operator.child.kill('SIGTERM');
        await operator.exited;
      }
      await rm(dataDir, { recursive: true, force: true });
    }
  }, TEST_MS);
});
