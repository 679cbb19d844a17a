import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '../../api/src/ids.js';
import { issueAppJobToken } from '../../api/src/modules/apps/job-tokens.js';
import { failLostRuns } from '../../api/src/modules/invocations/run-finish.js';
import { findInvocation, insertInvocation } from '../../api/src/modules/invocations/store.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { ESM_APP, deployByHand } from './app-runner.fixtures.js';

/**
 * Kubernetes mode's sweep of runs nobody will report (kube-jobs.ts calls it every 30 s in
 * every replica): against a real Postgres, with invocation rows and Job tokens as the API
 * leaves them. No cluster is needed: the sweep reads only the database.
 */

let app: TestApp;
let deploymentId: string;
const HOUR = 3_600_000;

beforeAll(async () => {
  app = await startTestApp();
  deploymentId = await deployByHand(app.database.db, app.deps.settings.apps!.dataDir, app.tenant.defaultProjectId, {
    appName: 'swept',
    version: 'v1',
    entry: 'index.mjs',
    files: { 'index.mjs': ESM_APP },
    actions: ['echo'],
  });
});
afterAll(async () => {
  await app?.close();
});

describe("the sweep of Kubernetes mode's lost runs", () => {
  const scope = () => ({ orgId: app.tenant.orgId, projectId: app.tenant.defaultProjectId });

  async function invocation(status: 'queued' | 'running', startedAgoMs: number, token?: { expiresInMs: number }): Promise<string> {
    // The test app's clock is fixed at its start: every time here is relative to it.
    const clockNow = app.deps.clock.now().getTime();
    const now = new Date(clockNow - startedAgoMs);
    const row = await insertInvocation(app.database.db, scope(), { id: newId('inv'), appName: 'swept', actionName: 'echo', version: 'v1', deploymentId, isAsync: true, asyncTimeoutSeconds: null, payload: null, now });
    if (status === 'running') await app.database.db.query(`UPDATE invocations SET status = 'running' WHERE id = $1`, [row.id]);
    if (token) {
      await issueAppJobToken(app.database.db, { kind: 'run', subjectId: row.id, scope: scope(), now, expiresAt: new Date(clockNow + token.expiresInMs), sealer: app.deps.sealer });
    }
    return row.id;
  }

  it('fails runs whose tokens all expired and runs never given a Job, and leaves live and young ones', async () => {
    // Real time passes after the test app's clock stopped (it failed so on a loaded machine).
    await new Promise((resolve) => setTimeout(resolve, 1500));
    const expired = await invocation('running', HOUR, { expiresInMs: -1000 });
    const orphan = await invocation('queued', 5 * 60_000);
    const live = await invocation('running', HOUR, { expiresInMs: HOUR });
    const young = await invocation('queued', 1000);
    const outside = await app.database.db.query<{ id: string }>(
      `INSERT INTO invocations (id, org_id, project_id, app_name, action_name, version, status, is_async, started_at, updated_at)
       VALUES ($1, $2, $3, 'elsewhere', 'a', 'v1', 'queued', true, now() - interval '1 hour', now()) RETURNING id`,
      [newId('inv'), app.tenant.orgId, app.tenant.defaultProjectId],
    );

    expect(await failLostRuns(app.deps, 60_000)).toBe(2);
    const status = async (id: string) => (await findInvocation(app.database.db, scope(), id))!;
    expect(await status(expired)).toMatchObject({ status: 'failed', status_reason: 'The run ended without reporting a result before its deadline' });
    expect(await status(orphan)).toMatchObject({ status: 'failed', status_reason: 'The run never started: its Job was not created' });
    expect((await status(expired)).output).toBe(JSON.stringify({ error: 'The run ended without reporting a result before its deadline' }));
    for (const id of [live, young]) expect((await status(id)).status).not.toBe('failed');
    // An invocation of an app not deployed here is an outside runner's to PATCH, not the sweep's.
    expect((await status(outside.rows[0]!.id)).status).toBe('queued');
    // Again: nothing left to do (the end is recorded once).
    expect(await failLostRuns(app.deps, 60_000)).toBe(0);
  });
});
