/**
 * The operator's /metrics, named as client-go and controller-runtime name theirs so the
 * dashboards and alerts people already run for controllers work unchanged:
 *
 * - the workqueue family per controller queue (`name` label): depth, adds, retries, how
 *   long keys wait in the queue and how long they are processed, the longest processing
 *   still running (a stuck reconcile shows as a growing value);
 * - reconcile totals and durations per controller and result (success, requeue_after,
 *   error);
 * - `leader_election_master_status{name}`: 1 on the replica leading, 0 on the others;
 * - prom-client's default process and Node.js metrics, unprefixed like every Go
 *   controller's process_* series (lib/default-metrics.ts, shared with the API).
 *
 * One registry per call (no global state): tests build as many as they like.
 */
import client from 'prom-client';
import { collectDefaultMetrics } from '../../lib/default-metrics.js';
import type { ControllerMetrics } from './k8s/controller.js';
import type { ReconcileResult, WorkQueueObserver } from './k8s/work-queue.js';

/** client-go's workqueue latency buckets: 10 ns … 10 s by factors of ten, plus longer reconciles. */
const QUEUE_BUCKETS = [1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 0.01, 0.1, 1, 10, 60];
/** controller-runtime's reconcile buckets, cut to what a browser launch takes. */
const RECONCILE_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

export interface OperatorMetrics extends ControllerMetrics {
  registry: client.Registry;
  /** Whether this replica leads the election named `lease`. */
  leading(lease: string, leading: boolean): void;
}

export function createOperatorMetrics(options: { defaultMetrics?: boolean } = {}): OperatorMetrics {
  const registry = new client.Registry();
  if (options.defaultMetrics !== false) collectDefaultMetrics(registry);
  const registers = [registry];
  const byName = ['name'] as const;

  const depth = new client.Gauge({ name: 'workqueue_depth', help: 'Current depth of workqueue', labelNames: byName, registers });
  const adds = new client.Counter({ name: 'workqueue_adds_total', help: 'Total number of adds handled by workqueue', labelNames: byName, registers });
  const retries = new client.Counter({ name: 'workqueue_retries_total', help: 'Total number of retries handled by workqueue', labelNames: byName, registers });
  const waited = new client.Histogram({
    name: 'workqueue_queue_duration_seconds',
    help: 'How long in seconds an item stays in workqueue before being requested',
    labelNames: byName,
    buckets: QUEUE_BUCKETS,
    registers,
  });
  const worked = new client.Histogram({
    name: 'workqueue_work_duration_seconds',
    help: 'How long in seconds processing an item from workqueue takes',
    labelNames: byName,
    buckets: QUEUE_BUCKETS,
    registers,
  });
  /** Keys being processed and since when, per queue (what the longest-running gauge reads). */
  const processing = new Map<string, Map<string, number>>();
  new client.Gauge({
    name: 'workqueue_longest_running_processor_seconds',
    help: 'How many seconds has the longest running processor for workqueue been running',
    labelNames: byName,
    registers,
    collect() {
      const now = performance.now();
      for (const [name, started] of processing) {
        const oldest = Math.min(now, ...started.values());
        this.set({ name }, (now - oldest) / 1000);
      }
    },
  });

  const reconciles = new client.Counter({
    name: 'browserplane_operator_reconcile_total',
    help: 'Reconciles per controller and result (success, requeue_after, error)',
    labelNames: ['controller', 'result'] as const,
    registers,
  });
  const reconcileSeconds = new client.Histogram({
    name: 'browserplane_operator_reconcile_duration_seconds',
    help: 'How long reconciles take per controller and result',
    labelNames: ['controller', 'result'] as const,
    buckets: RECONCILE_BUCKETS,
    registers,
  });
  const leader = new client.Gauge({
    name: 'leader_election_master_status',
    help: 'Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master',
    labelNames: byName,
    registers,
  });

  return {
    registry,
    queueObserver(name): WorkQueueObserver {
      const started = new Map<string, number>();
      processing.set(name, started);
      // Every series exists from the start at 0, so rate() and absent() behave before the first add.
      depth.set({ name }, 0);
      adds.inc({ name }, 0);
      retries.inc({ name }, 0);
      return {
        added: () => adds.inc({ name }),
        retried: () => retries.inc({ name }),
        depth: (value) => depth.set({ name }, value),
        taken: (key, waitedMs) => {
          started.set(key, performance.now());
          waited.observe({ name }, waitedMs / 1000);
        },
        processed: (key, durationMs) => {
          started.delete(key);
          worked.observe({ name }, durationMs / 1000);
        },
      };
    },
    reconciled(controller: string, result: ReconcileResult, durationMs: number) {
      reconciles.inc({ controller, result });
      reconcileSeconds.observe({ controller, result }, durationMs / 1000);
    },
    leading(lease, leading) {
      leader.set({ name: lease }, leading ? 1 : 0);
    },
  };
}
