import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FixedClock } from '../../api/src/clock.js';
import { insertAppVersion } from '../../api/src/modules/apps/apps-store.js';
import { DEPLOYMENT_DELETED_INVOCATION_REASON } from '../../api/src/modules/apps/deployments-service.js';
import { insertDeployment, setDeploymentStatus } from '../../api/src/modules/apps/deployments-store.js';
import { startTestApp, type TestApp } from '../support/test-app.js';

/**
 * DELETE /deployments/{id} against a running deployment with live app versions and
 * invocations (rows written directly: building one for real is the e2e tier's job). The
 * invocations of the deployment fail with a reason; another deployment's are untouched.
 */

const clock = new FixedClock(new Date('2026-07-01T12:00:00.000Z'));
let app: TestApp;

beforeAll(async () => {
  app = await startTestApp({ clock });
});
afterAll(async () => app?.close());

async function runningDeployment(id: string, appName: string) {
  const scope = { orgId: app.tenant.orgId, projectId: app.tenant.defaultProjectId };
  const db = app.database.db;
  await insertDeployment(db, scope, { id, entrypointRelPath: 'index.ts', envVars: {}, version: '1', force: false, source: { type: 'file', checksum: 'x'.repeat(64) }, now: clock.now() });
  await setDeploymentStatus(db, id, { status: 'running', from: ['queued'], now: clock.now() });
  await insertAppVersion(db, scope, { id: `app_${id}`, deployment_id: id, app_name: appName, version: '1', runtime: 'node', entry: 'index.js', actions: [{ name: 'run' }], env_vars: {}, created_at: clock.now() });
  const invocations: string[] = [];
  for (const status of ['queued', 'running', 'succeeded']) {
    const invocationId = `inv_${id}_${status}`;
    await db.query(
      `INSERT INTO invocations (id, org_id, project_id, app_name, action_name, version, deployment_id, status, is_async, started_at, updated_at, finished_at)
       VALUES ($1, $2, $3, $4, 'run', '1', $5, $6, true, $7, $7, $8)`,
      [invocationId, scope.orgId, scope.projectId, appName, id, status, clock.now(), status === 'succeeded' ? clock.now() : null],
    );
    invocations.push(invocationId);
  }
  return invocations;
}

describe('DELETE /deployments/{id}', () => {
  it('stops the deployment, deletes its app versions and fails its unfinished invocations', async () => {
    const http = app.tenant.http;
    const doomed = await runningDeployment('dep_doomed', 'doomed-app');
    const kept = await runningDeployment('dep_kept', 'kept-app');
    const appNames = async () => ((await http.get('/apps')).body as { app_name: string }[]).map((a) => a.app_name).sort();
    expect(await appNames()).toEqual(['doomed-app', 'kept-app']);

    const res = await http.delete('/deployments/dep_doomed');
    expect(res.status).toBe(204);
    expect((await http.get('/deployments/dep_doomed')).body).toMatchObject({ status: 'stopped', status_reason: 'Deleted with DELETE /deployments/{id}' });
    expect(await appNames()).toEqual(['kept-app']);

    const statusOf = async (id: string) => (await http.get(`/invocations/${id}`)).body as { status: string; status_reason?: string };
    expect(await statusOf(doomed[0]!)).toMatchObject({ status: 'failed', status_reason: DEPLOYMENT_DELETED_INVOCATION_REASON });
    expect(await statusOf(doomed[1]!)).toMatchObject({ status: 'failed', status_reason: DEPLOYMENT_DELETED_INVOCATION_REASON });
    expect((await statusOf(doomed[2]!)).status).toBe('succeeded');
    for (const id of kept) expect((await statusOf(id)).status).not.toBe('failed');
  });

  it('refuses a bad id with 400 and an unknown one with 404, changing nothing', async () => {
    const http = app.tenant.http;
    const before = (await http.get('/deployments')).body;
    const bad = await http.delete(`/deployments/${'x'.repeat(300)}`);
    expect(bad.status).toBe(400);
    expect(bad.body).toMatchObject({ code: 'invalid_request', message: expect.any(String), details: [expect.objectContaining({ field: 'params.id' })] });
    const missing = await http.delete('/deployments/dep_nope');
    expect(missing.status).toBe(404);
    expect(missing.body).toMatchObject({ code: 'not_found', details: [] });
    expect((await http.get('/deployments')).body).toEqual(before);
  });
});
