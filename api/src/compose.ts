/**
 * The dependencies every part of the app takes, composed from the configuration: its own
 * module so that the operator, whose GitOps reconcilers work through the API's modules,
 * composes them without loading the HTTP app (express, routes) it never serves.
 */
import type { KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { BrowserRuntime } from '../../contract/browser-runtime.js';
import { parseAllowedNetworks } from '../../contract/egress.js';
import type { AppDeps, AppSettings } from './app-deps.js';
import { systemClock, type Clock } from './clock.js';
import { databaseTimeouts, type Config } from './config.js';
import { credentialProviderSettingsOf } from './config-credential-providers.js';
import { createSealer } from './crypto/sealer.js';
import { agentTokensFrom } from '../../contract/agent-client.js';
import type { Db } from './db/pool.js';
import { AuthCache } from './modules/api-keys/auth-cache.js';
import { createPgEventHub } from './events/hub.js';
import { appsSettingsOf } from './modules/apps/settings.js';
import { telemetrySettingsOf } from './config-telemetry.js';
import { extensionSettingsOf } from './modules/extensions/index.js';
import { loadProxyUpstreams, type ProxySettings } from './modules/proxies/upstreams.js';
import { allProjectResources } from './modules/registry.js';
import type { ProfileStore } from './ports/profile-store.js';
import type { ReplayStore } from './ports/replay-store.js';
import { replaySettingsOf } from './config-replays.js';
import { SessionEnds } from './session-ends.js';
import { storesOf } from './storage/stores.js';

/** What the composer is handed rather than reads from the configuration. */
export interface ComposeParts {
  db: Db;
  databaseUrl: string;
  runtime: BrowserRuntime;
  /** Browsers run in pods: this host's free memory says nothing about room for them. */
  kubernetes: boolean;
  /** Kubernetes mode: the cluster (apps build and run there as Jobs when a runner image is set). */
  kubeConfig?: KubeConfig | undefined;
  namespace?: string | undefined;
  log: Logger;
  shutdown: AbortSignal;
  /** loadEncryptionKey's, loaded by the caller, whose runtime needs the agent tokens too. */
  encryptionKey: Buffer;
}

/**
 * What a caller replaces in the composition: the test app its clock, its settings (a
 * whole set: tests state every limit they rely on), its proxy settings and profile
 * store. The service and the operator replace nothing.
 */
export interface ComposeOverrides {
  clock?: Clock;
  settings?: AppSettings;
  proxy?: Partial<ProxySettings>;
  profileStore?: ProfileStore;
  replayStore?: ReplayStore;
}

/**
 * The one composition of AppDeps, for the service, the operator (its GitOps reconcilers
 * work through the API's modules) and the test app, each with its own parts and overrides.
 */
export async function composeAppDeps(config: Config, parts: ComposeParts, overrides: ComposeOverrides = {}): Promise<AppDeps> {
  const { db, databaseUrl, runtime, log } = parts;
  const clock = overrides.clock ?? systemClock;
  const events = createPgEventHub(databaseUrl, db, log, databaseTimeouts(config));
  const stores = storesOf(config);
  return {
    db,
    clock,
    log,
    settings: overrides.settings ?? {
      maxBodyBytes: config.BROWSERPLANE_MAX_BODY_BYTES,
      orgMaxConcurrentSessions: config.BROWSERPLANE_ORG_MAX_CONCURRENT_SESSIONS,
      region: config.BROWSERPLANE_REGION,
      publicUrl: config.BROWSERPLANE_PUBLIC_URL,
      browserLaunchTimeoutMs: config.BROWSERPLANE_BROWSER_LAUNCH_TIMEOUT_MS,
      poolLaunchConcurrency: config.BROWSERPLANE_POOL_LAUNCH_CONCURRENCY,
      poolLeaseCommit: config.BROWSERPLANE_POOL_LEASE_COMMIT,
      // In Kubernetes mode browsers run in pods, not on this host: its free memory says nothing.
      poolMinFreeMemoryBytes: parts.kubernetes ? 0 : config.BROWSERPLANE_POOL_MIN_FREE_MEMORY_MB * 1024 * 1024,
      authMinHealthCheckIntervalSeconds: config.BROWSERPLANE_AUTH_MIN_HEALTH_CHECK_INTERVAL_SECONDS,
      replays: replaySettingsOf(config),
      spares: { max: config.BROWSERPLANE_SPARE_BROWSERS, learnMinutes: config.BROWSERPLANE_SPARE_LEARN_MINUTES },
      auditLog: { retentionDays: config.BROWSERPLANE_AUDIT_LOG_RETENTION_DAYS, queueMax: config.BROWSERPLANE_AUDIT_LOG_QUEUE_MAX },
      telemetry: telemetrySettingsOf(config),
      credentialProviders: credentialProviderSettingsOf(config),
      // Kubernetes mode builds and runs apps in Jobs of the runner image, none without one;
      // API replicas there never run an in-process build queue.
      apps: !parts.kubernetes
        ? appsSettingsOf(config)
        : parts.kubeConfig && config.BROWSERPLANE_APP_RUNNER_IMAGE
          ? appsSettingsOf(config, { kubeConfig: parts.kubeConfig, namespace: parts.namespace ?? config.namespace })
          : undefined,
      extensions: extensionSettingsOf(config),
      liveViewFrameAncestors: config.BROWSERPLANE_LIVE_VIEW_FRAME_ANCESTORS,
    },
    projectResources: allProjectResources(),
    sealer: createSealer(parts.encryptionKey),
    events,
    authCache: new AuthCache(events, clock),
    proxy: {
      upstreams: await loadProxyUpstreams(config.BROWSERPLANE_PROXY_UPSTREAMS, config.BROWSERPLANE_PROXY_UPSTREAMS_FILE),
      checkUrl: config.BROWSERPLANE_PROXY_CHECK_URL,
      egress: { blockPrivate: config.BROWSERPLANE_BLOCK_PRIVATE_NETWORKS, allowed: parseAllowedNetworks(config.BROWSERPLANE_ALLOWED_PRIVATE_NETWORKS) },
      ...overrides.proxy,
    },
    profileStore: overrides.profileStore ?? stores.profiles(),
    replayStore: overrides.replayStore ?? stores.replays(),
    shutdown: parts.shutdown,
    runtime,
    agentTokens: agentTokensFrom(parts.encryptionKey),
    sessionEnds: new SessionEnds(),
  };
}
