import client from 'prom-client';

/**
 * prom-client's default gauges named like counters: promlint (the rules of `promtool
 * check metrics`) refuses a _total suffix on a gauge, and each is the sum over the `type`
 * label of the gauge of the same name without it (nodejs_active_handles{type}, …), which
 * stays.
 */
const GAUGES_NAMED_TOTAL = ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total'];

/**
 * The default process and Node.js metrics, unprefixed as every exporter names them
 * (process_cpu_seconds_total, nodejs_heap_size_used_bytes, …), the same in the API and the
 * operator, minus the gauges promlint refuses.
 */
export function collectDefaultMetrics(registry: client.Registry): void {
  client.collectDefaultMetrics({ register: registry });
  for (const name of GAUGES_NAMED_TOTAL) registry.removeSingleMetric(name);
}
