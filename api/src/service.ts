import { setMaxListeners } from 'node:events';
import { mkdir } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import type { Express } from 'express';
import type { Logger } from 'pino';
import { buildApp } from './app.js';
import { systemClock } from './clock.js';
import { composeAppDeps } from './compose.js';
import { agentFsEnv, databaseTimeouts, type Config } from './config.js';
import { EmbeddedPostgres } from './db/embedded-postgres.js';
import { migrate } from './db/migrate.js';
import { createPool } from './db/pool.js';
import { ADMIN_KEY_FILE, bootstrap } from './modules/orgs/bootstrap.js';
import { adoptBrowsersAtStart, attachCdpProxy } from './modules/browsers/module.js';
import { clearScratch, configureSandbox } from './modules/apps/sandbox.js';
import { stopBuilds } from './modules/apps/module.js';
import { failInterruptedRuns, stopAllRuns } from './modules/invocations/index.js';
import { createAppServices, startBackground } from './app-services.js';
import { closeProfileWriters, liveProfileWriters } from './modules/browsers/profile-archive-stop.js';
import { finishLiveRecordings } from './modules/replays/index.js';
import { KubeConfig } from '@kubernetes/client-node';
import { createLocalRuntime } from './runtime/local-runtime.js';
import { createCustomResourceRuntime } from './runtime/custom-resource-runtime.js';
import type { BrowserRuntime } from '../../contract/browser-runtime.js';
import { agentTokensFrom, type AgentTokens } from '../../contract/agent-client.js';
import { loadEncryptionKey } from './crypto/sealer.js';

/** How long each browser gets for Browser.close when the service stops. */
const BROWSER_STOP_GRACE_MS = 5000;

export interface RunningService {
  url: string;
  stop(reason: string): Promise<void>;
  /** During a stop: cut the requests still open now instead of at the deadline; the cleanup goes on. */
  hurry(): void;
}

/**
 * Starts the whole embedded service: Postgres (embedded unless DATABASE_URL is set),
 * migrations, bootstrap, HTTP. `stop` drains requests, then closes the pool, then stops
 * Postgres, in that order.
 */
export async function startService(config: Config, log: Logger): Promise<RunningService> {
  await mkdir(config.dataDir, { recursive: true, mode: 0o700 });
  const embedded = config.DATABASE_URL
    ? undefined
    : await EmbeddedPostgres.start(config.dataDir, log, {
        limit: config.BROWSERPLANE_POSTGRES_RESTART_LIMIT,
        windowMs: config.BROWSERPLANE_POSTGRES_RESTART_WINDOW_SECONDS * 1000,
      });
  try {
    // An external database over the URL given; the embedded one over its Unix socket.
    const databaseUrl = config.DATABASE_URL ?? embedded!.localUrl;
    await migrate(databaseUrl, log);
    const db = createPool(databaseUrl, config.DATABASE_POOL_MAX, databaseTimeouts(config));
    db.on('error', (error) => log.error({ err: error }, 'idle Postgres connection failed'));
    const shutdown = new AbortController();
    // Every open event stream listens for shutdown: thousands are expected, not a leak.
    setMaxListeners(0, shutdown.signal);
    const encryptionKey = await loadEncryptionKey(config.BROWSERPLANE_ENCRYPTION_KEY, config.dataDir);
    const browsers = browserRuntime(config, log, agentTokensFrom(encryptionKey));
    const { runtime } = browsers;
    const deps = await composeAppDeps(config, { db, databaseUrl, runtime, kubernetes: browsers.kubernetes, kubeConfig: browsers.kubeConfig, namespace: config.namespace, log, shutdown: shutdown.signal, encryptionKey });
    // Only the embedded Postgres is this process's to restart; an external one is not.
    if (embedded) deps.databaseSupervision = () => embedded.status();
    const boot = await bootstrap(
      db,
      systemClock,
      {
        orgName: config.BROWSERPLANE_ORG_NAME,
        ownerEmail: config.BROWSERPLANE_ADMIN_EMAIL,
        configuredKey: config.BROWSERPLANE_API_KEY,
        dataDir: config.dataDir,
      },
      log,
    );
    if (boot.generatedKey) announceAdminKey(boot.generatedKey, `${config.dataDir}/${ADMIN_KEY_FILE}`);

    // Before the first request: sessions of a killed service carry on or end with a reason.
    // Not in Kubernetes mode: API replicas share the cluster's browsers, and adoption would
    // end another replica's launch in flight as interrupted (the reaper covers the rest).
    if (!browsers.kubernetes) await adoptBrowsersAtStart(deps);
    // Runs of app actions live in this process: a previous one's are lost (docs/apps.md).
    configureSandbox({ log });
    if (!browsers.kubernetes) {
      await failInterruptedRuns(deps);
      await clearScratch(config.dataDir);
    }

    const services = createAppServices(deps);
    const { app, lifecycle } = buildApp(deps, services);
    const server = await listen(app, config.PORT, config.HOST);
    const cdpProxy = attachCdpProxy(server, deps);
    const address = server.address() as AddressInfo;
    const url = `http://${address.address}:${address.port}`;
    // Agents fetch and save profiles here: on this host by loopback, from pods by the Service.
    deps.settings.internalUrl = config.BROWSERPLANE_INTERNAL_URL ?? loopbackUrl(address);
    // After the internal URL is known: pool browsers with a profile fetch it from there.
    // The reaper, the pool fill, and login flows, health checks and re-auths (on the job queue).
    const background = await startBackground(deps, services, cdpProxy.connections, { reaper: {}, pools: {}, jobs: {}, spares: {}, auditRetention: {}, telemetryRetention: {} });
    log.info({ url, dataDir: config.dataDir, embeddedPostgres: Boolean(embedded) }, 'browserplane listening');

    const hurried = new AbortController();
    return {
      url,
      hurry: () => hurried.abort(),
      async stop(reason) {
        await announceShutdown(runtime, browsers.kubernetes, Boolean(embedded), log);
        const writers = await liveProfileWriters(deps);
        log.info({ reason, profile_writers: writers.length }, 'shutting down: draining requests');
        lifecycle.draining = true;
        shutdown.abort();
        cdpProxy.close();
        // Waiting acquires are answered (204) at once; launches in flight end with the
        // shutdown signal, and are waited for after the drain so it starts promptly.
        // Flows fail as interrupted and the job queue stops taking work, alongside the
        // drain: awaited after it, so the listener closes without waiting for them.
        const poolsAndFlowsStopped = background.stopPoolsAndFlows();
        // App runs are killed and recorded failed (their keys revoked, browsers deleted) while the database is up.
        const runsStopped = stopAllRuns(deps);
        // Likewise the build in progress: its deployment fails with the shutdown as its reason.
        const buildsStopped = stopBuilds(deps);
        await background.stopReaper();
        // Recordings and profiles reach this server by HTTP: both are handed over before it stops listening.
        if (!browsers.kubernetes) await finishLiveRecordings(deps);
        await closeProfileWriters(deps, writers);
        await drain(server, config.BROWSERPLANE_SHUTDOWN_TIMEOUT_MS, log, hurried.signal);
        await poolsAndFlowsStopped;
        await runsStopped;
        await buildsStopped;
        // After the drain, so the last calls are in the queue; before the pool closes.
        await background.stopAuditSweep();
        await services.auditLog.close();
        // A stopped embedded service leaves no browser behind (their sessions end as
        // browser_gone when the reaper next looks); in Kubernetes mode they carry on.
        await browsers.stop();
        await deps.events.close();
        await db.end();
        await embedded?.stop();
        log.info('stopped');
      },
    };
  } catch (error) {
    await embedded?.stop().catch((stopError: unknown) => log.error({ err: stopError }, 'could not stop Postgres'));
    throw error;
  }
}

/**
 * The runtime the setting names, and what stopping the service does to its browsers.
 * Local: agents of a crashed or killed service are re-adopted from the state dir at start,
 * and a clean stop ends them. Kubernetes: BrowserSession resources the operator turns into
 * pods, in the cluster of the in-cluster service account or KUBECONFIG; a stop ends none.
 */
function browserRuntime(config: Config, log: Logger, agentTokens: AgentTokens): { runtime: BrowserRuntime; kubernetes: boolean; kubeConfig?: KubeConfig; stop(): Promise<void> } {
  if (config.BROWSERPLANE_RUNTIME === 'kubernetes') {
    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromDefault();
    const runtime = createCustomResourceRuntime({ config: kubeConfig, namespace: config.namespace, log, agentTokens, launchTimeoutMs: config.BROWSERPLANE_BROWSER_LAUNCH_TIMEOUT_MS });
    return { runtime, kubernetes: true, kubeConfig, stop: () => runtime.close() };
  }
  const runtime = createLocalRuntime({
    stateDir: path.join(config.dataDir, 'browsers'),
    log,
    agentTokens,
    standbyAgents: config.BROWSERPLANE_STANDBY_AGENTS,
    ...(config.BROWSERPLANE_CHROMIUM_PATH ? { chromePath: config.BROWSERPLANE_CHROMIUM_PATH } : {}),
    egress: { blockPrivateNetworks: config.BROWSERPLANE_BLOCK_PRIVATE_NETWORKS, allowedNetworks: config.BROWSERPLANE_ALLOWED_PRIVATE_NETWORKS },
    agentFsEnv: agentFsEnv(config),
    sessionUids: { base: config.BROWSERPLANE_SESSION_UID_BASE, count: config.BROWSERPLANE_SESSION_UID_COUNT },
    memoryLimitMb: config.BROWSERPLANE_BROWSER_MEMORY_MB,
  });
  return { runtime, kubernetes: false, stop: () => runtime.terminateAll(BROWSER_STOP_GRACE_MS) };
}

/** The listen address as a local client reaches it: a wildcard address means loopback. */
export function loopbackUrl(address: AddressInfo): string {
  const host = address.address === '0.0.0.0' ? '127.0.0.1' : address.address === '::' ? '::1' : address.address;
  return `http://${host.includes(':') ? `[${host}]` : host}:${address.port}`;
}

/**
 * Deadlines for a client to deliver its request. Node's defaults (60 s for headers,
 * checked only every 30 s) let a slowloris client that trickles headers hold a socket
 * for up to 90 s; these close it within about 25 s. The whole request keeps Node's
 * 300 s because fs write_file and profile archive uploads stream large bodies through
 * here. Responses (SSE, file downloads) are not bounded by either.
 */
export interface ServerTimeouts {
  /** Time allowed to receive the request line and every header. */
  headersTimeoutMs: number;
  /** Time allowed to receive the whole request, body included. */
  requestTimeoutMs: number;
  /** How often Node looks for connections past either deadline. */
  checkIntervalMs: number;
}

export const SERVER_TIMEOUTS: ServerTimeouts = { headersTimeoutMs: 20_000, requestTimeoutMs: 300_000, checkIntervalMs: 5_000 };

/** The HTTP server of the app with the deadlines above; tests build theirs with this too. */
export function createHttpServer(app: Express, timeouts: ServerTimeouts = SERVER_TIMEOUTS): Server {
  const server = createServer(
    {
      headersTimeout: timeouts.headersTimeoutMs,
      requestTimeout: timeouts.requestTimeoutMs,
      connectionsCheckingInterval: timeouts.checkIntervalMs,
    },
    app,
  );
  return server;
}

function listen(app: Express, port: number, host: string): Promise<Server> {
  return new Promise((resolve, reject) => {
    const server = createHttpServer(app);
    server.once('error', reject);
    server.listen(port, host, () => resolve(server));
  });
}

/**
 * Stops accepting, lets in-flight requests finish, and cuts whatever is left at the
 * deadline, or at once when `hurry` fires (a second signal).
 */
async function drain(server: Server, timeoutMs: number, log: Logger, hurry: AbortSignal): Promise<void> {
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  server.closeIdleConnections();
  // Until here the listener took connections (recordings and profiles were handed over through it; /readyz said 503).
  log.info({ timeoutMs }, 'shutting down: listener closed, waiting for requests in flight');
  const cut = (message: string) => {
    log.warn({ timeoutMs }, message);
    server.closeAllConnections();
  };
  const deadline = setTimeout(() => cut('requests still open at the shutdown deadline; closing them'), timeoutMs);
  const onHurry = () => cut('requests still open at a second signal; closing them');
  if (hurry.aborted) onHurry();
  else hurry.addEventListener('abort', onHurry, { once: true });
  await closed;
  clearTimeout(deadline);
  hurry.removeEventListener('abort', onHurry);
}

/** One line saying what the stop will take down, so a person watching knows why it takes a while. */
async function announceShutdown(runtime: BrowserRuntime, kubernetes: boolean, embeddedPostgres: boolean, log: Logger): Promise<void> {
  // In Kubernetes mode the browsers carry on; only local ones are stopped.
  const count = kubernetes ? 0 : (await runtime.list().catch(() => [])).length;
  const parts = [`${count} browser${count === 1 ? '' : 's'}`, ...(embeddedPostgres ? ['embedded postgres'] : [])];
  log.info({ browsers: count, embeddedPostgres }, `shutting down: ${parts.join(', ')}`);
}

/** The one time the generated key is shown; it goes to the terminal, never to the log. */
function announceAdminKey(key: string, file: string): void {
  process.stdout.write(
    [
      '',
      '  Browserplane created an admin API key. It is shown only this once:',
      '',
      `    ${key}`,
      '',
      `  It is also in ${file} (mode 600). Use it as: Authorization: Bearer <key>`,
      '',
      '',
    ].join('\n'),
  );
}
