import { execFileSync, spawnSync } from 'node:child_process';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../api/src/clock.js';
import { createOperatorMetrics } from '../../operator/src/metrics.js';
import { eventually } from '../support/eventually.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { createPool, ORG_CAP, type Pool } from './browser-pools.fixtures.js';
import { FakeAgent, FakeRuntime, newProject, useRuntime } from './browsers.fixtures.js';

/*
 * /metrics of the API and of the operator, linted with client_golang's promlint (the
 * rules of `promtool check metrics`: units in names, _total on counters, help on every
 * metric…), built from the Go module proxy by scripts/promlint-binary.sh. The API's pool
 * series are made to exist first (a pool filled, a lease, a wait) with the stand-in
 * runtime; the operator's registry is the one its /metrics serves, with a queue, a
 * reconcile and the leader gauge recorded.
 */

let promlint: string;
let app: TestApp;
let agent: FakeAgent;

beforeAll(async () => {
  const script = path.resolve(import.meta.dirname, '../../scripts/promlint-binary.sh');
  promlint = execFileSync(script, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'], timeout: 600_000 }).trim().split('\n').pop()!;
  app = await startTestApp({ clock: systemClock, settings: { orgMaxConcurrentSessions: ORG_CAP } });
  agent = new FakeAgent();
  useRuntime(app, new FakeRuntime(await agent.listen()));
  await app.services.pools.start({ intervalMs: 100 });
}, 600_000);
afterAll(async () => {
  await app?.services.pools.stop();
  await app?.close();
  await agent?.close();
});

/** promlint's problems with this exposition, one per line (empty: clean). */
function lint(text: string): { status: number | null; problems: string[] } {
  const run = spawnSync(promlint, { input: text, encoding: 'utf8' });
  return { status: run.status, problems: run.stdout.split('\n').filter(Boolean) };
}

describe('promlint', () => {
  it('catches a badly named metric (the check can fail)', () => {
    const bad = '# HELP requests_count Requests\n# TYPE requests_count counter\nrequests_count 1\n# TYPE no_help gauge\nno_help 1\n';
    const { status, problems } = lint(bad);
    expect(status).toBe(1);
    expect(problems).toContain('requests_count: counter metrics should have "_total" suffix');
    expect(problems).toContain('no_help: no help text');
  });

  it('finds nothing wrong with the API’s /metrics, pool series included', async () => {
    const { http: client } = await newProject(app.tenant.http);
    const pool = await createPool(client, { size: 1, headless: true, fill_rate_per_minute: 6000 });
    await eventually(async () => (await client.get<Pool>(`/browser_pools/${pool.id}`)).body, { timeoutMs: 10_000, intervalMs: 25, what: 'pool fill', accept: (p) => p.available_count === 1 });
    const leased = await client.post<{ session_id: string }>(`/browser_pools/${pool.id}/acquire`, {});
    expect((await client.post(`/browser_pools/${pool.id}/acquire`, { acquire_timeout_seconds: 0.1 })).status).toBe(204);
    expect((await client.post(`/browser_pools/${pool.id}/release`, { session_id: leased.body.session_id })).status).toBe(204);

    const text = (await app.client().get('/metrics')).text;
    expect(text).toContain('browserplane_pool_acquire_wait_seconds_bucket{');
    expect(text).toMatch(/^process_cpu_seconds_total /m);
    expect(lint(text)).toEqual({ status: 0, problems: [] });
  });

  it('finds nothing wrong with the operator’s /metrics', async () => {
    const metrics = createOperatorMetrics();
    const queue = metrics.queueObserver('browser-pools');
    queue.added?.('a');
    queue.taken?.('a', 3);
    queue.processed?.('a', 12);
    metrics.reconciled('browser-pools', 'success', 12);
    metrics.leading('browserplane-operator', true);
    const text = await metrics.registry.metrics();
    expect(text).toMatch(/^workqueue_adds_total\{name="browser-pools"\} 1$/m);
    expect(lint(text)).toEqual({ status: 0, problems: [] });
  });
});
