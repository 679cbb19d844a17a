import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../api/src/clock.js';
import { createOperatorMetrics } from '../../operator/src/metrics.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { helmBinary, renderChart, type KubeObject } from './support/helm.js';

// The chart's Grafana dashboard and PrometheusRule against what the processes really export:
// every query (panel targets, alert expressions) goes through Prometheus's own PromQL parser
// (test/tools/promql, built by scripts/promql-check.sh from the Go module), and every metric a
// query names must be in a real scrape of the API (an app with real Postgres) or the operator
// (its registry). No Grafana or Prometheus runs here; a query that parses and names only
// exported metrics is what "the dashboard renders the metrics" can mean without them.

const ROOT = path.resolve(import.meta.dirname, '../..');
const PROMETHEUS_RULE = 'monitoring.coreos.com/v1/PrometheusRule';
let app: TestApp;
let exported: Set<string>;
let promqlCheck: string;

/** Metric family names in a text exposition (# TYPE lines). */
const familiesOf = (text: string) => new Set([...text.matchAll(/^# TYPE (\S+) /gm)].map((m) => m[1]!));

beforeAll(async () => {
  await helmBinary();
  const built = await promisify(execFile)(path.join(ROOT, 'scripts/promql-check.sh'), [], { maxBuffer: 1024 * 1024 });
  promqlCheck = built.stdout.trim().split('\n').at(-1)!;
  app = await startTestApp({ clock: systemClock });
  const api = await (await fetch(`${app.url}/metrics`)).text();
  const operator = createOperatorMetrics();
  operator.leading('browserplane-operator', true);
  exported = new Set([...familiesOf(api), ...familiesOf(await operator.registry.metrics())]);
}, 15 * 60_000);
afterAll(async () => {
  await app?.close();
});

/** Runs the parser over the queries: the metric names each one selects, or the parse errors. */
async function parse(queries: string[]): Promise<{ errors: string[]; metrics: Map<number, string[]> }> {
  const child = execFile(promqlCheck, [], { maxBuffer: 1024 * 1024 });
  child.stdin!.end(JSON.stringify(queries));
  let out = '';
  child.stdout!.on('data', (chunk: string) => (out += chunk));
  const code = await new Promise<number>((resolve) => child.on('close', (c) => resolve(c ?? -1)));
  const errors: string[] = [];
  const metrics = new Map<number, string[]>();
  for (const line of out.split('\n').filter(Boolean)) {
    const [index, kind, name] = line.split('\t');
    if (kind === 'metric') metrics.set(Number(index), [...(metrics.get(Number(index)) ?? []), name!]);
    else errors.push(`${queries[Number(index)]}: ${kind}`);
  }
  if (code !== 0 && errors.length === 0) errors.push(`promql-check exited ${code}`);
  return { errors, metrics };
}

/** A histogram's series (_bucket, _sum, _count) belong to its family. */
const familyOf = (name: string) => (exported.has(name) ? name : name.replace(/_(bucket|sum|count)$/, ''));

async function checkQueries(queries: string[]): Promise<void> {
  const { errors, metrics } = await parse(queries);
  expect(errors).toEqual([]);
  const unknown = queries.flatMap((query, i) => (metrics.get(i) ?? []).filter((name) => !exported.has(familyOf(name))).map((name) => `${name} (in ${query})`));
  expect(unknown).toEqual([]);
  // Every query names at least one metric: a typo'd selector parses but selects nothing.
  expect(queries.filter((_, i) => !metrics.get(i)?.length)).toEqual([]);
}

describe('the Grafana dashboard', () => {
  let dashboard: { panels: { title: string; targets: { expr: string }[] }[]; templating: { list: { query: unknown }[] } };

  beforeAll(async () => {
    const objects = await renderChart({ namespace: 'monitoring-render', set: ['metrics.grafanaDashboard.enabled=true'] });
    const map = objects.find((o: KubeObject) => o.kind === 'ConfigMap' && o.metadata.name === 'browserplane-dashboard')!;
    expect(map.metadata.labels).toMatchObject({ grafana_dashboard: '1' });
    dashboard = JSON.parse((map.data as Record<string, string>)['browserplane.json']!) as typeof dashboard;
  });

  it('queries, in Prometheus\'s own grammar, only metrics the API and the operator export', async () => {
    // Grafana's variables, as Grafana fills them in.
    const fill = (expr: string) => expr.replaceAll('$__rate_interval', '1m').replaceAll('$job', '.*');
    const queries = dashboard.panels.flatMap((panel) => panel.targets.map((target) => fill(target.expr)));
    expect(queries.length).toBeGreaterThan(15);
    await checkQueries(queries);
  });

  it('has the panels the issue asks for: waiters, wait time, leases, launches and failures, launch time, browsers by state, sessions ended', () => {
    const all = dashboard.panels.flatMap((panel) => panel.targets.map((target) => target.expr)).join('\n');
    for (const metric of ['browserplane_pool_acquire_waiters', 'browserplane_pool_acquire_wait_seconds_bucket', 'browserplane_pool_leases_total', 'browserplane_pool_launches_total', 'browserplane_pool_launch_failures_total', 'browserplane_pool_launch_duration_seconds_bucket', 'browserplane_pool_browsers', 'browserplane_browser_sessions_ended_total', 'browserplane_pool_releases_total']) {
      expect(all, metric).toContain(metric);
    }
  });

  it('is not rendered unless asked for', async () => {
    expect((await renderChart({ namespace: 'monitoring-render' })).filter((o) => o.kind === 'ConfigMap' && o.metadata.name === 'browserplane-dashboard')).toEqual([]);
  });
});

describe('the PrometheusRule', () => {
  let rules: { alert: string; expr: string; for: string; labels: { severity: string }; annotations: { summary: string } }[];

  beforeAll(async () => {
    const objects = await renderChart({ namespace: 'monitoring-render', set: ['metrics.prometheusRule.enabled=true'], apiVersions: [PROMETHEUS_RULE] });
    const rule = objects.find((o) => o.kind === 'PrometheusRule')!;
    rules = (rule.spec as { groups: { rules: typeof rules }[] }).groups.flatMap((group) => group.rules);
  });

  it('alerts on the five conditions the issue names, each with a severity, a wait and a summary', () => {
    expect(rules.map((r) => r.alert).sort()).toEqual(['BrowserplaneApiErrors', 'BrowserplaneDatabaseUnreachable', 'BrowserplaneOperatorNotLeading', 'BrowserplanePoolExhausted', 'BrowserplanePoolLaunchFailures']);
    for (const rule of rules) {
      expect(['warning', 'critical']).toContain(rule.labels.severity);
      expect(rule.for).toMatch(/^\d+m$/);
      expect(rule.annotations.summary.length).toBeGreaterThan(10);
    }
  });

  it('alerts with expressions Prometheus parses, on metrics the processes export, in the release namespace', async () => {
    await checkQueries(rules.map((r) => r.expr));
    for (const rule of rules) expect(rule.expr, rule.alert).toContain('namespace="monitoring-render"');
  });

  it('is rendered only when asked for and when the cluster serves its CRD', async () => {
    expect((await renderChart({ namespace: 'monitoring-render', set: ['metrics.prometheusRule.enabled=true'] })).filter((o) => o.kind === 'PrometheusRule')).toEqual([]);
    expect((await renderChart({ namespace: 'monitoring-render', apiVersions: [PROMETHEUS_RULE] })).filter((o) => o.kind === 'PrometheusRule')).toEqual([]);
  });
});
