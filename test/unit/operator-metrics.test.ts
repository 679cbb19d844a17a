import { describe, expect, it } from 'vitest';
import { runWorkers, WorkQueue } from '../../operator/src/k8s/work-queue.js';
import { createOperatorMetrics, type OperatorMetrics } from '../../operator/src/metrics.js';

/** A limiter that never delays, so the counts do not depend on time. */
const noDelay = { when: () => 0, forget: () => {}, retries: () => 0 };

async function valueOf(metrics: OperatorMetrics, name: string, labels: Record<string, string>, suffix = ''): Promise<number | undefined> {
  const metric = metrics.registry.getSingleMetric(name);
  if (!metric) throw new Error(`no metric ${name}`);
  const { values } = await metric.get();
  // Histograms name each sample (_count, _sum, _bucket); counters and gauges do not.
  const found = (values as { metricName?: string; labels: Record<string, string | number>; value: number }[]).find((v) => (v.metricName ?? name) === `${name}${suffix}` && Object.entries(labels).every(([key, value]) => v.labels[key] === value));
  return found?.value;
}

describe('operator metrics', () => {
  it('count a work queue’s adds, retries, depth, waits and work under the queue’s name', async () => {
    const metrics = createOperatorMetrics({ defaultMetrics: false });
    const queue = new WorkQueue(noDelay, metrics.queueObserver('sessions'));
    const name = { name: 'sessions' };
    expect(await valueOf(metrics, 'workqueue_adds_total', name)).toBe(0);

    for (const key of ['a', 'b', 'a']) queue.add(key);
    // A repeat of a queued key is not an add (client-go counts the same way).
    expect(await valueOf(metrics, 'workqueue_adds_total', name)).toBe(2);
    expect(await valueOf(metrics, 'workqueue_depth', name)).toBe(2);

    const key = await queue.get();
    expect(await valueOf(metrics, 'workqueue_depth', name)).toBe(1);
    expect(await valueOf(metrics, 'workqueue_queue_duration_seconds', name, '_count')).toBe(1);
    await new Promise((resolve) => setTimeout(resolve, 60));
    // A key still being processed shows in the longest-running gauge.
    expect(await valueOf(metrics, 'workqueue_longest_running_processor_seconds', name)).toBeGreaterThanOrEqual(0.05);
    queue.done(key!);
    expect(await valueOf(metrics, 'workqueue_work_duration_seconds', name, '_count')).toBe(1);
    expect(await valueOf(metrics, 'workqueue_work_duration_seconds', name, '_sum')).toBeGreaterThanOrEqual(0.05);
    expect(await valueOf(metrics, 'workqueue_longest_running_processor_seconds', name)).toBe(0);

    queue.addRateLimited('c');
    expect(await valueOf(metrics, 'workqueue_retries_total', name)).toBe(1);
    await queue.shutDown();
    expect(await valueOf(metrics, 'workqueue_depth', name)).toBe(0);
  });

  it('count reconciles per controller and result, with their durations', async () => {
    const metrics = createOperatorMetrics({ defaultMetrics: false });
    const queue = new WorkQueue(noDelay, metrics.queueObserver('pools'));
    let brokenTries = 0;
    const outcomes: Record<string, () => Promise<{ requeueAfterMs?: number } | void>> = {
      fine: async () => {},
      later: () => Promise.resolve({ requeueAfterMs: 60_000 }),
      // Fails once, then succeeds on the retry.
      broken: () => (++brokenTries === 1 ? Promise.reject(new Error('boom')) : Promise.resolve()),
    };
    const seen: string[] = [];
    const workers = runWorkers(
      queue,
      async (key) => {
        seen.push(key);
        return outcomes[key]!();
      },
      { workers: 2, onReconciled: (_key, result, durationMs) => metrics.reconciled('pools', result, durationMs) },
    );
    for (const key of Object.keys(outcomes)) queue.add(key);
    // "broken" is retried at once (no delay): wait for its second try, then stop.
    while (brokenTries < 2) await new Promise((resolve) => setTimeout(resolve, 5));
    await queue.shutDown();
    await workers;

    const total = (result: string) => valueOf(metrics, 'browserplane_operator_reconcile_total', { controller: 'pools', result });
    expect(seen.sort()).toEqual(['broken', 'broken', 'fine', 'later']);
    expect(await total('success')).toBe(2);
    expect(await total('requeue_after')).toBe(1);
    expect(await total('error')).toBe(1);
    expect(await valueOf(metrics, 'browserplane_operator_reconcile_duration_seconds', { controller: 'pools', result: 'success' }, '_count')).toBe(2);
    expect(await valueOf(metrics, 'workqueue_retries_total', { name: 'pools' })).toBe(1);
  });

  it('report leadership per lease, and default process metrics in the exposition', async () => {
    const metrics = createOperatorMetrics();
    metrics.leading('browserplane-operator', false);
    expect(await valueOf(metrics, 'leader_election_master_status', { name: 'browserplane-operator' })).toBe(0);
    metrics.leading('browserplane-operator', true);
    const text = await metrics.registry.metrics();
    expect(text).toContain('leader_election_master_status{name="browserplane-operator"} 1');
    expect(text).toMatch(/^process_cpu_seconds_total \d/m);
    expect(text).toMatch(/^nodejs_heap_size_used_bytes \d/m);
  });
});
