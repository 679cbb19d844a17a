import type { SessionEnds } from './session-ends.js';
import type { Logger } from 'pino';
import type { Clock } from './clock.js';
import type { Sealer } from './crypto/sealer.js';
import type { Db, Queryable } from './db/pool.js';
import type { DatabaseSupervision } from './db/postgres-supervisor.js';
import type { EventHub } from './events/hub.js';
import type { AuthCache } from './modules/api-keys/auth-cache.js';
import type { AppsSettings } from './modules/apps/settings.js';
import type { TelemetrySettings } from './config-telemetry.js';
import type { CredentialProviderSettings } from './config-credential-providers.js';
import type { ExtensionSettings } from './modules/extensions/settings.js';
import type { ProxySettings } from './modules/proxies/upstreams.js';
import type { ProfileStore } from './ports/profile-store.js';
import type { ReplayStore } from './ports/replay-store.js';
import type { ReplaySettings } from './config-replays.js';
import type { BrowserRuntime } from '../../contract/browser-runtime.js';
import type { AgentTokens } from '../../contract/agent-client.js';

/** Counts what still lives in a project; a project with any of it cannot be deleted. */
export type ProjectResourceCounter = (
  db: Queryable,
  projectId: string,
  now: Date,
) => Promise<{ kind: string; count: number }>;

export interface AppSettings {
  maxBodyBytes: number;
  orgMaxConcurrentSessions: number;
  /** The region name browsers and pools report (default us-east, DEFAULT_REGION). */
  region?: string | undefined;
  /** How clients reach the service (for cdp_ws_url); from the Host header when unset. */
  publicUrl?: string | undefined;
  /** How long a browser create waits for the browser to be ready. */
  browserLaunchTimeoutMs: number;
  /**
   * The service's base URL as its browsers' agents reach it (they fetch and save profiles
   * there). Known only once the server listens, so the composition root sets it then;
   * while unset, sessions with a profile are refused (503).
   */
  internalUrl?: string | undefined;
  /** Warm pool launches in flight at once in this process (default max(2, cores)). */
  poolLaunchConcurrency?: number | undefined;
  /** 'fast': a pool lease does not wait for its commit to reach disk (BROWSERPLANE_POOL_LEASE_COMMIT; default 'durable'). */
  poolLeaseCommit?: 'durable' | 'fast' | undefined;
  /** Pools start no browser below this much available memory (default 512 MiB). */
  poolMinFreeMemoryBytes?: number | undefined;
  /** Warm spares (modules/browsers/spares.ts): how many at most (0: none) and how long a configuration stays wanted. */
  spares?: { max: number; learnMinutes: number } | undefined;
  /** The shortest health_check_interval an auth connection may ask for (default 300 s). */
  authMinHealthCheckIntervalSeconds?: number | undefined;
  /** How long a login flow may take before it EXPIRES (default 15 min; a re-auth 5 min). */
  authFlowTtlSeconds?: number | undefined;
  /** Interval of `sse_heartbeat` frames on event streams (default 15 s). */
  sseHeartbeatMs?: number | undefined;
  /** The app runtime (deployments, builds): its data dir and bounds; unset, deployments answer 503. */
  apps?: AppsSettings | undefined;
  /** External credential providers (1Password Connect): default server, call bounds, per-org cap; absent fields take their defaults. */
  credentialProviders?: CredentialProviderSettings | undefined;
  /** Uploaded extensions and the Chrome Web Store download (default DEFAULT_EXTENSION_SETTINGS). */
  extensions?: ExtensionSettings | undefined;
  /** How long a sync POST /invocations waits for a run (default SYNC_WAIT_MS, 50 s; tests shorten it). */
  invocationSyncWaitMs?: number | undefined;
  /** Session recordings' retention and bounds (config-replays.ts); unset, DEFAULT_REPLAY_SETTINGS. */
  replays?: ReplaySettings | undefined;
  /** The audit log: days entries are kept (default 90) and entries queued for writing at most (default 10,000). */
  auditLog?: { retentionDays: number; queueMax: number } | undefined;
  /** Browser telemetry's retention and per-session cap (default DEFAULT_TELEMETRY_SETTINGS). */
  telemetry?: TelemetrySettings | undefined;
  /** Origins besides 'self' allowed to frame the live view page (BROWSERPLANE_LIVE_VIEW_FRAME_ANCESTORS; default none). */
  liveViewFrameAncestors?: string[] | undefined;
}

/** Everything the HTTP layer needs, wired in main (or a test) and passed down. */
export interface AppDeps {
  db: Db;
  clock: Clock;
  log: Logger;
  settings: AppSettings;
  projectResources: ProjectResourceCounter[];
  /** Seals secrets at rest (credential values, TOTP secrets, proxy passwords). */
  sealer: Sealer;
  /** Change notifications across replicas (LISTEN/NOTIFY). */
  events: EventHub;
  /** Presented API keys already looked up (modules/api-keys/auth-cache.ts); without it every request reads the key. */
  authCache?: AuthCache;
  proxy: ProxySettings;
  profileStore: ProfileStore;
  /** Where finished session recordings (MP4) live. */
  replayStore: ReplayStore;
  /** Where browsers run: local agent processes now, pods in Kubernetes mode. */
  runtime: BrowserRuntime;
  /** Each browser's agent token, which every call to its agent presents (CDP, fs, computer, live view). */
  agentTokens: AgentTokens;
  /**
   * Aborted when shutdown begins. Long-lived responses (event streams) end themselves on
   * it, so draining does not wait for them until the shutdown deadline.
   */
  shutdown: AbortSignal;
  /** Sessions ended, counted where they end (session-ends.ts). */
  sessionEnds: SessionEnds;
  /**
   * What the supervisor of the embedded Postgres is doing (running, restarting, given up),
   * for /readyz and /healthz. Unset with DATABASE_URL: nothing here supervises that one.
   */
  databaseSupervision?: (() => DatabaseSupervision) | undefined;
}
