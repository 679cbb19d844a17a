#!/usr/bin/env node
/**
 * The operator process (`node dist/operator/src/main.js`), the composition root: config
 * parsed here, adapters wired here.
 *
 * Replicas campaign for one Lease; only the leader runs controllers. When leadership is
 * lost the process exits non-zero instead of campaigning again (client-go's practice: a
 * clean restart beats controllers half stopped while a successor already acts), and the
 * Deployment restarts it as a standby. SIGTERM stops the controllers, releases the Lease
 * (so a standby leads at once) and exits 0.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { agentFsEnv } from '../../api/src/index.js';
import { installOutboundDispatcher } from '../../api/src/index.js';
import { createLogger } from '../../api/src/index.js';
import { applyCliArgs, packageVersion, signalPolicy } from '../../api/src/index.js';
import { OperatorConfigError, operatorHelp, parseOperatorConfig, type OperatorConfig } from './config.js';
import { LeaderElector } from './k8s/leader-election.js';
import { kubernetesLeaseStore } from './k8s/lease-store.js';
import type { AppDeps } from '../../api/src/index.js';
import { PoolManager } from '../../api/src/modules/browser-pools/index.js';
import { apiConfigOf, poolReconcilerDeps } from './pool-deps.js';
import { startBrowserPoolReconciler } from './reconcilers/browser-pool.js';
import { startAuthConnectionReconciler } from './reconcilers/auth-connection.js';
import { createBrowserSessionReconciler, type BrowserSessionReconciler } from './reconcilers/browser-session.js';
import { createKubernetesRuntime } from './runtime/kubernetes-runtime.js';
import { agentTokensFrom } from '../../contract/agent-client.js';
import { createEventRecorder } from './k8s/event-recorder.js';
import { createOperatorMetrics, type OperatorMetrics } from './metrics.js';
import { REPORTING_CONTROLLER } from './reconcilers/transition-events.js';

interface OperatorState {
  leading: boolean;
  /** Another replica was seen holding the Lease: this one stands by, and the API server answers. */
  standingBy: boolean;
  reconciler?: BrowserSessionReconciler;
  stopping: boolean;
  /** Served at /metrics on the health port. */
  metrics: OperatorMetrics;
}

/** How long a stop waits for reconciles in flight before the process exits anyway. */
const DRAIN_TIMEOUT_MS = 15_000;

async function main(): Promise<void> {
  if (!applyCliArgs(process.argv.slice(2), { program: 'browserplane-operator', help: operatorHelp, version: packageVersion })) return;
  let config: OperatorConfig;
  try {
    config = parseOperatorConfig(process.env);
  } catch (error) {
    if (error instanceof OperatorConfigError) {
      process.stderr.write(error.message + '\n');
      process.exitCode = 2;
      return;
    }
    throw error;
  }
  const log = createLogger(config.LOG_LEVEL).child({ component: 'operator', identity: config.POD_NAME });
  installOutboundDispatcher();
  // In a pod: the service account (no kubeconfig there); elsewhere: KUBECONFIG or ~/.kube/config.
  const kube = new KubeConfig();
  kube.loadFromDefault();

  const state: OperatorState = { leading: false, standingBy: false, stopping: false, metrics: createOperatorMetrics() };
  state.metrics.leading(config.BROWSERPLANE_OPERATOR_LEASE, false);
  const stopping = new AbortController();
  // With DATABASE_URL, BrowserPools applied with kubectl are reconciled into pools too.
  const apiConfig = apiConfigOf(process.env);
  const pools = apiConfig ? await poolReconcilerDeps(apiConfig, kube, config.POD_NAMESPACE, log, stopping.signal) : undefined;
  const health = await startHealthServer(config, state);
  log.info({ port: (health.address() as AddressInfo).port, namespace: config.POD_NAMESPACE, lease: config.BROWSERPLANE_OPERATOR_LEASE }, 'operator started; campaigning');

  const stop = new AbortController();
  // As the API's (api/src/shutdown-signals.ts): a copy forwarded by make or a second
  // signal lets the drain finish (the Lease is released); only a third exits at once.
  const verdictOf = signalPolicy();
  const onSignal = (signal: NodeJS.Signals) => {
    const verdict = verdictOf(signal);
    if (verdict === 'abandon') {
      log.warn({ signal }, 'third signal during shutdown: exiting now');
      process.exit(1);
    }
    if (verdict !== 'stop') {
      if (verdict === 'hurry') log.warn({ signal }, 'second signal during shutdown: still draining (a third signal exits at once)');
      return;
    }
    log.info({ signal }, 'stopping');
    state.stopping = true;
    stop.abort();
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);

  let work: Promise<void> | undefined;
  let failed = false;
  const elector = new LeaderElector({
    identity: config.POD_NAME,
    store: kubernetesLeaseStore(kube, config.POD_NAMESPACE, config.BROWSERPLANE_OPERATOR_LEASE),
    leaseDurationMs: config.BROWSERPLANE_LEASE_DURATION_SECONDS * 1000,
    renewDeadlineMs: config.BROWSERPLANE_LEASE_RENEW_DEADLINE_SECONDS * 1000,
    retryPeriodMs: config.BROWSERPLANE_LEASE_RETRY_PERIOD_SECONDS * 1000,
    onStartedLeading(signal) {
      state.leading = true;
      state.metrics.leading(config.BROWSERPLANE_OPERATOR_LEASE, true);
      log.info('leading: starting controllers');
      work = lead(config, kube, log, state, signal, pools?.deps).catch((error: unknown) => {
        log.error({ err: error }, 'controllers failed');
        failed = true;
        stop.abort();
      });
      // The elector releases the Lease on SIGTERM only once this has drained.
      return work;
    },
    onStoppedLeading() {
      state.leading = false;
      state.metrics.leading(config.BROWSERPLANE_OPERATOR_LEASE, false);
    },
    onNewLeader(leader) {
      state.standingBy = leader !== config.POD_NAME;
      log.info({ leader }, 'leader observed');
    },
    onError(error) {
      log.warn({ err: error }, 'leader election: lease read or write failed');
    },
  });
  const outcome = await elector.run(stop.signal);
  state.stopping = true;
  if (work) await Promise.race([work, new Promise((resolve) => setTimeout(resolve, DRAIN_TIMEOUT_MS).unref())]);
  await new Promise((resolve) => health.close(resolve));
  stopping.abort();
  await pools?.close().catch((error: unknown) => log.warn({ err: error }, 'closing the database failed'));
  if (outcome === 'lost') {
    log.error('leadership lost: exiting so that a fresh process campaigns again');
    exitWhenIdle(1);
  } else {
    log.info({ failed }, 'stopped');
    exitWhenIdle(failed ? 1 : 0);
  }
}

/** The leader's work: the controllers, until leadership ends. */
async function lead(config: OperatorConfig, kube: KubeConfig, log: Logger, state: OperatorState, signal: AbortSignal, poolDeps: AppDeps | undefined): Promise<void> {
  const pod = config.BROWSERPLANE_BROWSER_POD;
  // Best effort: an Event that cannot be written is logged and dropped, never fails a reconcile.
  const events = createEventRecorder({ config: kube, reportingController: REPORTING_CONTROLLER, reportingInstance: config.POD_NAME, log: log.child({ component: 'events' }) });
  const observed = { events, metrics: state.metrics };
  const runtime = createKubernetesRuntime({
    config: kube,
    namespace: config.POD_NAMESPACE,
    // Every setting, placement included (nodeSelector, tolerations, …): browser-pod.ts
    // leaves out the ones the chart passes empty.
    // The disk quota and upload limits hold in pods as on a local host.
    pod: { ...pod, agentEnv: agentFsEnv(config) },
    log,
    agentTokens: agentTokensFrom(config.BROWSERPLANE_ENCRYPTION_KEY),
    launchTimeoutMs: config.BROWSERPLANE_BROWSER_LAUNCH_TIMEOUT_MS,
    ownerReferencesOf: (browserId) => reconciler.ownerReferencesOf(browserId),
  });
  const reconciler: BrowserSessionReconciler = createBrowserSessionReconciler({
    config: kube,
    namespace: config.POD_NAMESPACE,
    runtime,
    log,
    workers: config.BROWSERPLANE_OPERATOR_WORKERS,
    resyncMs: config.BROWSERPLANE_OPERATOR_RESYNC_SECONDS * 1000,
    terminateGraceMs: config.BROWSERPLANE_BROWSER_TERMINATE_GRACE_MS,
    ...observed,
  });
  state.reconciler = reconciler;
  try {
    const pools = poolDeps ? startBrowserPoolReconciler({ config: kube, namespace: config.POD_NAMESPACE, deps: poolDeps, pools: new PoolManager(poolDeps), signal, workers: config.BROWSERPLANE_OPERATOR_WORKERS, ...observed }) : undefined;
    const connections = poolDeps ? startAuthConnectionReconciler({ config: kube, namespace: config.POD_NAMESPACE, deps: poolDeps, signal, workers: config.BROWSERPLANE_OPERATOR_WORKERS, ...observed }) : undefined;
    await Promise.all([reconciler.run(signal), pools?.done, connections?.done]);
  } finally {
    state.reconciler = undefined;
    await runtime.close();
  }
}

/** /healthz: the process serves. /readyz: leading with synced caches, or standing by. /metrics: Prometheus. */
function startHealthServer(config: OperatorConfig, state: OperatorState): Promise<http.Server> {
  const server = http.createServer((request, response) => {
    const path = new URL(request.url ?? '/', 'http://operator').pathname;
    const answer = (status: number, body: object) => {
      response.writeHead(status, { 'content-type': 'application/json' });
      response.end(JSON.stringify(body));
    };
    const role = state.leading ? 'leader' : state.standingBy ? 'standby' : 'candidate';
    if (path === '/healthz') return answer(200, { status: 'ok', role });
    if (path === '/metrics') {
      const { registry } = state.metrics;
      registry.metrics().then(
        (text) => {
          response.writeHead(200, { 'content-type': registry.contentType });
          response.end(text);
        },
        (error: unknown) => answer(500, { code: 'metrics_failed', message: error instanceof Error ? error.message : String(error) }),
      );
      return;
    }
    if (path === '/readyz') {
      const ready = !state.stopping && (state.leading ? state.reconciler?.synced === true : state.standingBy);
      return answer(ready ? 200 : 503, { status: ready ? 'ready' : 'not_ready', role });
    }
    answer(404, { code: 'route_not_found', message: `no route for ${request.method} ${path}` });
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.BROWSERPLANE_OPERATOR_HEALTH_PORT, config.BROWSERPLANE_OPERATOR_HEALTH_HOST, () => resolve(server));
  });
}

/**
 * Ends the process by letting the event loop empty, so pino's asynchronous writes finish
 * in order (see api/src/main.ts); should a handle keep the loop alive, exit anyway.
 */
function exitWhenIdle(code: number): void {
  process.exitCode = code;
  setTimeout(() => process.exit(code), 5000).unref();
}

main().catch((error: unknown) => {
  process.stderr.write(`browserplane operator failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
