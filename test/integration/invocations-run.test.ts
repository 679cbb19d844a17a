import { spawnSync } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { failInterruptedRuns, INTERRUPTED_BY_RESTART, stopInvocationsOfDeployment } from '../../api/src/modules/invocations/index.js';
import type { HttpClient } from '../support/http.js';
import { openSse } from '../support/sse.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { ESM_APP, deployByHand } from './app-runner.fixtures.js';
import { newProject } from './browsers.fixtures.js';

/**
 * Invocations of a deployed app run in the service: the real runner, sandbox, SDK and
 * Node, against an app version made by hand (a build dir and its app_versions row), as
 * the deploy route will leave one.
 */

const ACTIONS = ['echo', 'nothing', 'fail', 'hang', 'log', 'env', 'self', 'secret'];

let app: TestApp;
let http: HttpClient;
let projectId: string;
let deploymentId: string;

const invoke = (body: Record<string, unknown>) => http.post('/invocations', { app_name: 'demo', version: 'v1', ...body });
const runnerAlive = (invocationId: string) => spawnSync('pgrep', ['-f', `runner-child.mjs invoke .* ${invocationId}$`]).status === 0;

describe.skipIf(process.getuid?.() !== 0)('invocations of a deployed app', () => {
  beforeAll(async () => {
    app = await startTestApp();
    ({ id: projectId, http } = await newProject(app.tenant.http));
    deploymentId = await deployByHand(app.database.db, app.deps.settings.apps!.dataDir, projectId, {
      appName: 'demo',
      version: 'v1',
      entry: 'index.mjs',
      files: { 'index.mjs': ESM_APP },
      actions: ACTIONS,
      envVars: { GREETING: 'hello from the deployment' },
    });
  });
  afterAll(async () => {
    await app?.close();
  });

  it('runs a sync invocation to its output', async () => {
    const res = await invoke({ action_name: 'echo', payload: '{"n":1}' });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ action_name: 'echo', status: 'succeeded' });
    expect(JSON.parse(res.body.output as string)).toEqual({ invocation: res.body.id, payload: { n: 1 } });
    const got = await http.get(`/invocations/${res.body.id}`);
    expect(got.body).toMatchObject({ status: 'succeeded', app_name: 'demo', version: 'v1', payload: '{"n":1}' });
    expect(got.body.finished_at).not.toBeNull();
    const listed = await http.get(`/invocations?deployment_id=${deploymentId}&action_name=echo`);
    expect((listed.body as { id: string }[]).map((row) => row.id)).toContain(res.body.id);
  });

  it('gives the action the deployment env, the service URL and a key of its own, dead once it ends', async () => {
    const env = await invoke({ action_name: 'env' });
    expect(JSON.parse(env.body.output as string)).toEqual({ greeting: 'hello from the deployment', base: app.deps.settings.internalUrl, hasKey: true });
    const self = await invoke({ action_name: 'self' });
    const output = JSON.parse(self.body.output as string) as { status: number; invocation: string; key: string };
    expect(output).toMatchObject({ status: 200, invocation: 'running' });
    const afterwards = await app.client(output.key).get(`/invocations/${self.body.id}`);
    expect(afterwards.status).toBe(401);
    const { rows } = await app.database.db.query('SELECT invocation_id, deleted_at, project_id FROM api_keys WHERE invocation_id = $1', [self.body.id]);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ project_id: projectId });
    expect(rows[0].deleted_at).not.toBeNull();
  });

  it('fails with the message an action throws', async () => {
    const res = await invoke({ action_name: 'fail' });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: 'failed', status_reason: 'the action broke on purpose' });
    // kernel invoke prints only output, never status_reason.
    expect(JSON.parse(res.body.output as string)).toEqual({ error: 'the action broke on purpose' });
  });

  it('answers 404 action_not_found for an action the app lacks, and records nothing', async () => {
    const before = (await http.get('/invocations?limit=100')).body.length as number;
    const res = await invoke({ action_name: 'nope' });
    expect(res.status).toBe(404);
    expect(res.body).toMatchObject({ code: 'action_not_found' });
    expect(res.body.message).toMatch(/nope/);
    expect(res.body.details).toEqual([expect.objectContaining({ field: 'action_name' })]);
    expect((await http.get('/invocations?limit=100')).body.length).toBe(before);
  });

  it('keeps an app version that is not deployed here queued for an outside runner', async () => {
    const res = await http.post('/invocations', { app_name: 'demo', version: 'v2', action_name: 'echo' });
    expect(res.status).toBe(200);
    expect(res.body.status).toBe('queued');
    const row = await app.database.db.query('SELECT deployment_id FROM invocations WHERE id = $1', [res.body.id]);
    expect(row.rows[0].deployment_id).toBeNull();
  });

  it('answers an async invocation 202 queued and ends it at async_timeout_seconds', async () => {
    const res = await invoke({ action_name: 'hang', async: true, async_timeout_seconds: 10 });
    expect(res.status).toBe(202);
    expect(res.body.status).toBe('queued');
    await expect.poll(async () => (await http.get(`/invocations/${res.body.id}`)).body.status as string, { timeout: 5000 }).toBe('running');
    await expect
      .poll(async () => (await http.get(`/invocations/${res.body.id}`)).body as Record<string, unknown>, { timeout: 20_000, interval: 250 })
      .toMatchObject({ status: 'failed', status_reason: 'timed out after 10s (async_timeout_seconds 10)', output: JSON.stringify({ error: 'timed out after 10s (async_timeout_seconds 10)' }) });
    expect(runnerAlive(res.body.id as string)).toBe(false);
  }, 30_000);

  it('cancels a running invocation on PATCH failed, killing its run', async () => {
    const res = await invoke({ action_name: 'hang', async: true });
    await expect.poll(() => runnerAlive(res.body.id as string), { timeout: 10_000 }).toBe(true);
    const patched = await http.patch(`/invocations/${res.body.id}`, { status: 'failed' });
    expect(patched.status).toBe(200);
    expect(patched.body).toMatchObject({ status: 'failed', status_reason: 'Cancelled with PATCH /invocations/{id}' });
    await expect.poll(() => runnerAlive(res.body.id as string), { timeout: 5000 }).toBe(false);
    // The run's own end does not overwrite the cancel.
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect((await http.get(`/invocations/${res.body.id}`)).body.status_reason).toBe('Cancelled with PATCH /invocations/{id}');
  });

  it('takes PATCH succeeded on a running invocation as its end, with that output', async () => {
    const res = await invoke({ action_name: 'hang', async: true });
    await expect.poll(() => runnerAlive(res.body.id as string), { timeout: 10_000 }).toBe(true);
    const patched = await http.patch(`/invocations/${res.body.id}`, { status: 'succeeded', output: '"from outside"' });
    expect(patched.body).toMatchObject({ status: 'succeeded', output: '"from outside"' });
    await expect.poll(() => runnerAlive(res.body.id as string), { timeout: 5000 }).toBe(false);
  });

  it('streams the log lines before the final state, replayed from since', async () => {
    const res = await invoke({ action_name: 'log' });
    expect(res.body.status).toBe('succeeded');
    const stream = await openSse(`${app.url}/invocations/${res.body.id}/events`, { key: app.tenant.adminKey, headers: { 'X-Kernel-Project-Id': projectId } });
    await stream.ended;
    const logs = stream.payloads.filter((frame) => frame.event === 'log');
    expect(logs.map((frame) => frame.message as string)).toEqual(expect.arrayContaining(['line one', 'line two']));
    expect(logs.every((frame) => typeof frame.timestamp === 'string')).toBe(true);
    expect(stream.payloads.at(-1)).toMatchObject({ event: 'invocation_state', invocation: { status: 'succeeded' } });
    const future = new Date(app.clock.now().getTime() + 60_000).toISOString();
    const later = await openSse(`${app.url}/invocations/${res.body.id}/events?since=${encodeURIComponent(future)}`, { key: app.tenant.adminKey, headers: { 'X-Kernel-Project-Id': projectId } });
    await later.ended;
    expect(later.payloads.filter((frame) => frame.event === 'log')).toEqual([]);
    // kernel logs <app> reads the app's runtime log from its deployment's stream (since=5m).
    const deployment = await openSse(`${app.url}/deployments/${deploymentId}/events?since=5m`, { key: app.tenant.adminKey, headers: { 'X-Kernel-Project-Id': projectId } });
    await deployment.ended;
    const deploymentLogs = deployment.payloads.filter((frame) => frame.event === 'log').map((frame) => frame.message as string);
    expect(deploymentLogs).toEqual(expect.arrayContaining(['line one', 'line two']));
  });

  it('follows the log lines of a run live', async () => {
    const res = await invoke({ action_name: 'log', async: true });
    const stream = await openSse(`${app.url}/invocations/${res.body.id}/events`, { key: app.tenant.adminKey, headers: { 'X-Kernel-Project-Id': projectId } });
    await stream.ended;
    expect(stream.payloads.filter((frame) => frame.event === 'log').map((frame) => frame.message as string)).toEqual(expect.arrayContaining(['line one', 'line two']));
    expect(stream.payloads.at(-1)).toMatchObject({ event: 'invocation_state', invocation: { status: 'succeeded', output: '"logged"' } });
  });

  it("ends the runs of a deployment that goes (stopInvocationsOfDeployment)", async () => {
    const res = await invoke({ action_name: 'hang', async: true });
    await expect.poll(() => runnerAlive(res.body.id as string), { timeout: 10_000 }).toBe(true);
    await stopInvocationsOfDeployment(app.deps, { orgId: app.tenant.orgId, projectId }, deploymentId, 'The deployment was deleted');
    expect((await http.get(`/invocations/${res.body.id}`)).body).toMatchObject({ status: 'failed', status_reason: 'The deployment was deleted', output: '{"error":"The deployment was deleted"}' });
    expect(runnerAlive(res.body.id as string)).toBe(false);
  });

  it('answers a sync request past its wait with the invocation still running, and the run carries on', async () => {
    const short = await startTestApp({ settings: { invocationSyncWaitMs: 1000 } });
    try {
      const { id: shortProject, http: shortHttp } = await newProject(short.tenant.http);
      await deployByHand(short.database.db, short.deps.settings.apps!.dataDir, shortProject, { appName: 'demo', version: 'v1', entry: 'index.mjs', files: { 'index.mjs': ESM_APP }, actions: ACTIONS });
      const started = Date.now();
      const res = await shortHttp.post('/invocations', { app_name: 'demo', version: 'v1', action_name: 'hang' });
      expect(res.status).toBe(200);
      expect(res.body.status).toBe('running');
      expect(Date.now() - started).toBeLessThan(5000);
      expect(runnerAlive(res.body.id as string)).toBe(true);
      await shortHttp.patch(`/invocations/${res.body.id}`, { status: 'failed' });
      await expect.poll(() => runnerAlive(res.body.id as string), { timeout: 5000 }).toBe(false);
    } finally {
      await short.close();
    }
  });

  it('fails at start the runs a previous process left, and revokes their keys', async () => {
    const now = new Date();
    await app.database.db.query(
      `INSERT INTO invocations (id, org_id, project_id, app_name, action_name, version, deployment_id, status, is_async, started_at, updated_at)
       VALUES ('inv_leftover1', $1, $2, 'demo', 'hang', 'v1', $3, 'running', true, $4, $4)`,
      [app.tenant.orgId, projectId, deploymentId, now],
    );
    const outside = await http.post('/invocations', { app_name: 'other', version: 'v1', action_name: 'x' });
    expect(await failInterruptedRuns(app.deps)).toBeGreaterThanOrEqual(1);
    expect((await http.get('/invocations/inv_leftover1')).body).toMatchObject({ status: 'failed', status_reason: INTERRUPTED_BY_RESTART, output: JSON.stringify({ error: INTERRUPTED_BY_RESTART }) });
    // An outside runner's invocation is not this service's to fail.
    expect((await http.get(`/invocations/${outside.body.id}`)).body.status).toBe('queued');
  });
});
