import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import type { AppDeps, AppSettings } from '../../api/src/app-deps.js';
import type { AppServices } from '../../api/src/app-services.js';
import { buildApp } from '../../api/src/app.js';
import { FixedClock, systemClock, type Clock } from '../../api/src/clock.js';
import { createLogger } from '../../api/src/logger.js';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { composeAppDeps } from '../../api/src/compose.js';
import { parseConfig } from '../../api/src/config.js';
import { appsSettingsOf } from '../../api/src/modules/apps/settings.js';
import { createAppServices, startBackground } from '../../api/src/app-services.js';
import { issueApiKey } from '../../api/src/modules/api-keys/service.js';
import type { ProxySettings } from '../../api/src/modules/proxies/upstreams.js';
import { createFileProfileStore } from '../../api/src/storage/file-profile-store.js';
import { attachCdpProxy, type CdpProxy } from '../../api/src/modules/browsers/module.js';
import { REAP_INTERVAL_MS } from '../../api/src/modules/browsers/reaper.js';
import { POOL_RECONCILE_INTERVAL_MS } from '../../api/src/modules/browser-pools/manager.js';
import { LAUNCH_TIMEOUT_MS } from '../../api/src/modules/browsers/service.js';
import { parseAllowedNetworks } from '../../contract/egress.js';
import { createLocalRuntime, type LocalRuntime, type LocalRuntimeOptions } from '../../api/src/runtime/local-runtime.js';
import { agentTokensFrom } from '../../contract/agent-client.js';
import { insertOrg } from '../../api/src/modules/orgs/store.js';
import { insertProject } from '../../api/src/modules/projects/store.js';
import { stopAllRuns } from '../../api/src/modules/invocations/index.js';
import { stopBuilds } from '../../api/src/modules/apps/module.js';
import { freshDatabase, type TestDatabase } from './database.js';
import { HttpClient } from './http.js';

export interface Tenant {
  orgId: string;
  defaultProjectId: string;
  /** Plaintext of an org-wide admin key. */
  adminKey: string;
  adminKeyId: string;
  /** A client authenticated with the admin key. */
  http: HttpClient;
}

export interface TestApp {
  url: string;
  database: TestDatabase;
  deps: AppDeps;
  /** The app's long-lived services (pools, login flows), as its routes use them. */
  services: AppServices;
  clock: Clock;
  /** The first org, created with the app. */
  tenant: Tenant;
  /** Another org, for isolation tests. */
  newTenant(name?: string): Promise<Tenant>;
  /** The CDP WebSocket proxy mounted on the app's server, and the live runtime. */
  cdpProxy: CdpProxy;
  runtime: LocalRuntime;
  /** A client with any key, or none. */
  client(key?: string, headers?: Record<string, string>): HttpClient;
  close(): Promise<void>;
}

/**
 * The real app on a free port, in-process, against its own fresh database. The clock
 * is injectable; by default it is the real one.
 */
export async function startTestApp(
  options: {
    clock?: Clock;
    settings?: Partial<AppSettings>;
    log?: Logger;
    proxy?: Partial<ProxySettings>;
    /** BROWSERPLANE_BLOCK_PRIVATE_NETWORKS and its allow list, for the runtime and proxy checks (default: off, as in the service). */
    egress?: LocalRuntimeOptions['egress'];
    /**
     * Start the loops the service runs (the idle reaper and the pool fill) at these
     * intervals. They work on the clock's time, so the clock is then the real one
     * unless one is given.
     */
    background?: { reaperIntervalMs?: number; poolIntervalMs?: number; jobs?: boolean; jobPollIntervalMs?: number; telemetrySweepIntervalMs?: number };
    /** The browser file API's limits for the agents (AGENT_FS_*), as the service passes them from its config. */
    agentFsEnv?: Record<`AGENT_${'FS' | 'LOGS'}_${string}`, string>;
    /** Each browser's memory cgroup limit, MiB (the runtime's default otherwise). */
    memoryLimitMb?: number;
    /** More settings as the service reads them (e.g. BROWSERPLANE_STORE=s3 and its bucket); the file stores otherwise. */
    configEnv?: Record<string, string>;
  } = {},
): Promise<TestApp> {
  const database = await freshDatabase();
  const clock = options.clock ?? (options.background ? systemClock : new FixedClock(new Date()));
  const profileDir = await mkdtemp(path.join(os.tmpdir(), 'browserplane-test-profiles-'));
  const log = options.log ?? createLogger(process.env.TEST_LOG_LEVEL ?? 'silent');
  const shutdown = new AbortController();
  // The real local runtime: it spawns agents only when a test creates a browser.
  // One key, as in the service: it seals secrets and derives the agents' tokens.
  const encryptionKey = randomBytes(32);
  const agentTokens = agentTokensFrom(encryptionKey);
  const runtime = createLocalRuntime({
    stateDir: path.join(profileDir, 'browsers'),
    log,
    agentTokens,
    ...(options.egress ? { egress: options.egress } : {}),
    ...(options.agentFsEnv ? { agentFsEnv: options.agentFsEnv } : {}),
    ...(options.memoryLimitMb !== undefined ? { memoryLimitMb: options.memoryLimitMb } : {}),
  });
  // The service's own composition, with the test's clock, limits, proxy settings and store.
  const config = parseConfig({ BROWSERPLANE_DATA_DIR: profileDir, ...options.configEnv });
  const deps = await composeAppDeps(
    config,
    { db: database.db, databaseUrl: database.url, runtime, kubernetes: false, log, shutdown: shutdown.signal, encryptionKey },
    {
      clock,
      settings: {
        maxBodyBytes: 64 * 1024,
        orgMaxConcurrentSessions: 50,
        browserLaunchTimeoutMs: LAUNCH_TIMEOUT_MS,
        // Deployments store their sources and builds under the test's own dir.
        apps: appsSettingsOf(config),
        ...options.settings,
      },
      proxy: {
        upstreams: [],
        checkUrl: 'http://127.0.0.1:9/unused',
        egress: options.egress ? { blockPrivate: options.egress.blockPrivateNetworks, allowed: parseAllowedNetworks(options.egress.allowedNetworks) } : undefined,
        ...options.proxy,
      },
      ...(config.BROWSERPLANE_STORE === 'file' ? { profileStore: createFileProfileStore(profileDir) } : {}),
    },
  );
  const services = createAppServices(deps);
  const { app } = buildApp(deps, services);
  const server = await new Promise<Server>((resolve) => {
    const s = app.listen(0, '127.0.0.1', () => resolve(s));
  });
  const cdpProxy = attachCdpProxy(server, deps);
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  // Agents fetch and save profiles at the app's own address, as in the service.
  deps.settings.internalUrl ??= url;
  // The loops the service runs, only when asked for; login flows always run on demand.
  const background = await startBackground(deps, services, cdpProxy.connections, {
    reaper: options.background ? { intervalMs: options.background.reaperIntervalMs ?? REAP_INTERVAL_MS } : false,
    pools: options.background ? { intervalMs: options.background.poolIntervalMs ?? POOL_RECONCILE_INTERVAL_MS } : false,
    telemetryRetention: options.background?.telemetrySweepIntervalMs ? { intervalMs: options.background.telemetrySweepIntervalMs } : false,
    jobs: options.background?.jobs === true ? (options.background.jobPollIntervalMs ? { pollIntervalMs: options.background.jobPollIntervalMs } : {}) : false,
  });
  const client = (key?: string, headers?: Record<string, string>) => new HttpClient(url, key, headers);

  const newTenant = async (name = 'org'): Promise<Tenant> => {
    const now = clock.now();
    const org = await insertOrg(database.db, { name, ownerEmail: `${name}@example.test`, now });
    const project = await insertProject(database.db, { orgId: org.id, name: 'default', isDefault: true, now });
    const { row, plaintext } = await issueApiKey(database.db, {
      orgId: org.id,
      projectId: null,
      name: 'admin',
      lifetimeDays: null,
      createdBy: null,
      now,
    });
    return {
      orgId: org.id,
      defaultProjectId: project.id,
      adminKey: plaintext,
      adminKeyId: row.id,
      http: client(plaintext),
    };
  };
  const tenant = await newTenant('first');
  return {
    url,
    database,
    deps,
    services,
    clock,
    tenant,
    newTenant,
    client,
    cdpProxy,
    runtime,
    async close() {
      shutdown.abort();
      await background.stopReaper();
      await background.stopPoolsAndFlows();
      // App runs a test left going are killed and recorded while the database is up, as the service does.
      await stopAllRuns(deps);
      // Likewise a build in progress (its deployment recorded failed before the database goes).
      await stopBuilds(deps);
      cdpProxy.close();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
      await services.auditLog.close();
      await runtime.terminateAll(0);
      await deps.events.close();
      await database.drop();
      await rm(profileDir, { recursive: true, force: true });
    },
  };
}
