import path from 'node:path';
import { z } from 'zod';
import { parseAllowedNetworks } from '../../contract/egress.js';
import { appJobFields } from './config-app-jobs.js';
import { liveViewFields } from './config-live-view.js';
import { replayFields } from './config-replays.js';
import { storageFields } from './config-storage.js';
import { auditLogFields } from './config-audit-logs.js';
import { telemetryFields } from './config-telemetry.js';
import { credentialProviderFields } from './config-credential-providers.js';
import { extensionConfigFields } from './modules/extensions/settings.js';
import { DEFAULT_DATABASE_TIMEOUTS, type DatabaseTimeouts } from './db/pool.js';
import { DEFAULT_RESTART_POLICY } from './db/postgres-supervisor.js';
import { describeVariables } from './cli.js';
import { LOG_FORMATS } from './logger.js';

/**
 * Every setting the service reads, as one zod schema over the environment.
 * Parsed once in main; nothing else reads process.env.
 */

const port = z.coerce.number().int().min(0).max(65535);
const positiveInt = (max: number) => z.coerce.number().int().min(1).max(max);
const optionalString = z
  .string()
  .optional()
  .transform((v) => (v === undefined || v.trim() === '' ? undefined : v));

/** The browser file API's and log streams' limits: the API passes them to local agents, the operator to browser pods (AGENT_FS_*, AGENT_LOGS_*). */
export const browserFsLimitFields = {
  BROWSERPLANE_BROWSER_DISK_QUOTA_MB: z.coerce
    .number()
    .int()
    .min(0)
    .max(16 * 1024 * 1024)
    .default(1024)
    .describe('Disk quota of one browser\'s files (file API writes, uploads and the browser\'s own downloads), MiB; 0 turns it off'),
  BROWSERPLANE_BROWSER_ZIP_MAX_MB: positiveInt(16 * 1024 * 1024).default(512).describe('Largest total uncompressed size of one upload_zip, MiB'),
  BROWSERPLANE_BROWSER_ZIP_MAX_ENTRIES: positiveInt(10_000_000).default(10_000).describe('Most entries one upload_zip may hold'),
  BROWSERPLANE_BROWSER_ZIP_MAX_RATIO: positiveInt(1_000_000)
    .default(100)
    .describe('Most an upload_zip past 1 MiB uncompressed may expand, as uncompressed size over the zip\'s size'),
  BROWSERPLANE_BROWSER_FS_MAX_DEPTH: positiveInt(2048).default(64).describe('Deepest path (components below "/") the browser file API creates or walks'),
  BROWSERPLANE_BROWSER_FS_MAX_WALK_ENTRIES: positiveInt(100_000_000)
    .default(100_000)
    .describe('Most entries one directory walk of a browser\'s files visits (download_dir_zip, the quota\'s measure)'),
  // The log streams' limits (docs/logs.md), passed as AGENT_LOGS_*; the agent's own defaults are the same.
  BROWSERPLANE_BROWSER_LOG_STREAMS_MAX: positiveInt(1024).default(8).describe('Log streams open at once on one browser; one more is 409 log_stream_limit_reached'),
  BROWSERPLANE_BROWSER_LOG_LINE_KB: positiveInt(1024).default(16).describe('Longest log line sent, KiB; the rest is cut'),
  BROWSERPLANE_BROWSER_LOG_TAIL_LINES: positiveInt(1_000_000).default(1000).describe('Lines of a file\'s end a path log stream sends first'),
  BROWSERPLANE_BROWSER_LOG_TAIL_KB: positiveInt(1024 * 1024).default(1024).describe('How far back from a file\'s end those lines are looked for, KiB'),
  BROWSERPLANE_BROWSER_LOG_RING_LINES: positiveInt(1_000_000).default(1000).describe('Lines kept per supervised process of a browser (chromium, agent, xvfb, x11vnc)'),
  BROWSERPLANE_BROWSER_LOG_RING_KB: positiveInt(1024 * 1024).default(1024).describe('Bytes kept per supervised process of a browser, KiB; the oldest lines go first'),
};

export const configSchema = z.object({
  HOST: z.string().min(1).default('127.0.0.1').describe('Address the HTTP server listens on'),
  PORT: port.default(8080).describe('Port the HTTP server listens on (0 picks a free port)'),
  BROWSERPLANE_DATA_DIR: z
    .string()
    .min(1)
    .default('./.data')
    .describe('Directory for the embedded Postgres cluster, the admin key file and other local state'),
  DATABASE_URL: optionalString
    .pipe(z.url({ protocol: /^postgres(ql)?$/ }).optional())
    .describe('Postgres connection URL; when set, the embedded Postgres is not started'),
  BROWSERPLANE_API_KEY: optionalString
    .pipe(z.string().min(32).max(512).regex(/^[\x21-\x7e]+$/, 'printable ASCII without spaces').optional())
    .describe('Bootstrap admin API key to accept (at least 32 printable characters); when unset, one is generated on first start'),
  BROWSERPLANE_ORG_NAME: z.string().min(1).max(255).default('default').describe('Name of the organisation created on first start'),
  BROWSERPLANE_ADMIN_EMAIL: z
    .email()
    .default('admin@localhost')
    .describe('E-mail shown as the creator of API keys made by the bootstrap admin'),
  BROWSERPLANE_REGION: z
    .string()
    .max(63)
    .regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, 'lower-case letters, digits and dashes')
    .default('us-east')
    .describe('Region name reported on browsers and pools (newer SDKs require one); every browser runs here whatever region a request names'),
  BROWSERPLANE_ORG_MAX_CONCURRENT_SESSIONS: positiveInt(100000)
    .default(100)
    .describe('Concurrent browser sessions allowed per organisation (the read-only org limit)'),
  BROWSERPLANE_MAX_BODY_BYTES: positiveInt(1024 * 1024 * 1024)
    .default(1024 * 1024)
    .describe('Largest JSON request body accepted, in bytes; larger bodies get 413'),
  BROWSERPLANE_SHUTDOWN_TIMEOUT_MS: positiveInt(600000)
    .default(10000)
    .describe('How long shutdown waits for in-flight requests before closing connections'),
  DATABASE_POOL_MAX: positiveInt(1000).default(10).describe('Largest number of Postgres connections the pool opens'),
  DATABASE_CONNECT_TIMEOUT_MS: positiveInt(600_000)
    .default(DEFAULT_DATABASE_TIMEOUTS.connectMs)
    .describe('How long opening a Postgres connection, or waiting for a free one of a busy pool, may take before the request gets 503 database_unavailable'),
  DATABASE_QUERY_TIMEOUT_MS: positiveInt(3_600_000)
    .default(DEFAULT_DATABASE_TIMEOUTS.queryMs)
    .describe(
      'How long one SQL statement may run: Postgres cancels it then (statement_timeout), and the service gives up on a server that does not answer 1 s later and discards the connection; the request gets 503 database_unavailable',
    ),
  BROWSERPLANE_ENCRYPTION_KEY: optionalString
    .describe('32-byte key (base64 or hex) sealing secrets at rest; when unset, one is generated into the data dir'),
  BROWSERPLANE_APP_MAX_UPLOAD_MB: positiveInt(64 * 1024).default(100).describe('Largest deployment upload (POST /deployments: the file or zip), MiB; larger gets 413'),
  BROWSERPLANE_APP_MAX_UNPACKED_MB: positiveInt(64 * 1024)
    .default(500)
    .describe('Largest total size of a deployment\'s source once unpacked (zip entries or a git checkout, before dependencies), MiB'),
  BROWSERPLANE_APP_MAX_FILES: positiveInt(10_000_000).default(20_000).describe('Most files a deployment\'s source may hold once unpacked (before dependencies)'),
  BROWSERPLANE_APP_BUILD_TIMEOUT_SECONDS: positiveInt(86_400)
    .default(900)
    .describe('How long one deployment build (source fetch, npm install, transpile, reading its apps) may take before it fails'),
  BROWSERPLANE_APP_GIT_ALLOW_LOCAL: z
    .enum(['true', 'false'])
    .default('false')
    .transform((v) => v === 'true')
    .describe('true lets deployments name local git repositories (a path or file:// URL); off by default, since it would let any project clone any repository on this host'),
  BROWSERPLANE_PROFILE_DIR: optionalString.describe('Where browser profiles are stored (default: <data dir>/profiles)'),
  BROWSERPLANE_PROXY_UPSTREAMS: optionalString.describe(
    'JSON array of upstream proxies that serve the managed proxy types (see docs/PROXIES.md)',
  ),
  BROWSERPLANE_PROXY_UPSTREAMS_FILE: optionalString.describe('A file holding that JSON array instead'),
  BROWSERPLANE_PROXY_CHECK_URL: z
    .url({ protocol: /^https?$/ })
    .default('https://api.ipify.org/')
    .describe('URL a proxy check fetches through the proxy; it must answer with the egress IP'),
  BROWSERPLANE_PUBLIC_URL: optionalString
    .pipe(z.url({ protocol: /^https?$/ }).optional())
    .describe('Base URL clients use to reach the service (for cdp_ws_url); default: from each request’s Host header'),
  BROWSERPLANE_BROWSER_LAUNCH_TIMEOUT_MS: positiveInt(600000)
    .default(30000)
    .describe('How long creating a browser waits for it to be ready'),
  BROWSERPLANE_POOL_LAUNCH_CONCURRENCY: optionalString
    .pipe(z.coerce.number<string | undefined>().int().min(1).max(256).optional())
    .describe('Warm pool browsers this process launches at once, across pools (default: the number of cores, at least 2)'),
  BROWSERPLANE_POOL_LEASE_COMMIT: z
    .enum(['durable', 'fast'])
    .default('durable')
    .describe(
      'How an acquire commits its lease: durable (waits for the WAL to reach disk) or fast (does not, saving an fsync, often 1-4 ms, per acquire; a Postgres crash within about 0.6 s of an acquire can forget the lease, and the browser can then be leased again while its first holder still uses it)',
    ),
  BROWSERPLANE_AUTH_MIN_HEALTH_CHECK_INTERVAL_SECONDS: z.coerce
    .number()
    .int()
    .min(1)
    .max(86_400)
    .default(300)
    .describe('Shortest health_check_interval an auth connection may ask for'),
  BROWSERPLANE_POOL_MIN_FREE_MEMORY_MB: z.coerce
    .number()
    .int()
    .min(0)
    .max(1_048_576)
    .default(512)
    .describe('Pools start no warm browser while the machine has less memory available than this'),
  BROWSERPLANE_SPARE_BROWSERS: z.coerce
    .number()
    .int()
    .min(0)
    .max(256)
    .default(2)
    .describe(
      'Warm spare browsers kept for the launch configurations creates ask for (learned from recent creates; 0 turns spares off); a create that matches one takes it instead of starting Chromium',
    ),
  BROWSERPLANE_SPARE_LEARN_MINUTES: z.coerce
    .number()
    .int()
    .min(1)
    .max(10_080)
    .default(30)
    .describe('How long a launch configuration keeps its spare after the last create that asked for it'),
  BROWSERPLANE_CHROMIUM_PATH: z
    .string()
    .refine((value) => value.startsWith('/'), 'must be an absolute path')
    .optional()
    .describe('Embedded mode: the Chromium executable browsers run (default: the first found of Debian\'s and Google\'s install paths)'),
  BROWSERPLANE_STANDBY_AGENTS: z.coerce
    .number()
    .int()
    .min(0)
    .max(64)
    .default(1)
    .describe('Browser agents kept started and waiting, so a browser launch skips starting Node (about 20 MiB each)'),
  BROWSERPLANE_BROWSER_MEMORY_MB: z.coerce
    .number()
    .int()
    .min(0)
    .max(1024 * 1024)
    .default(2048)
    .describe('Embedded mode: memory limit of one browser (its agent, Chromium and the session\'s processes, in one memory cgroup), MiB; past it the kernel OOM-kills inside the browser (telemetry system_oom_kill). 0 turns it off; needs root and a memory cgroup controller'),
  BROWSERPLANE_BLOCK_PRIVATE_NETWORKS: z
    .enum(['true', 'false'])
    .default('false')
    .transform((v) => v === 'true')
    .describe(
      'Local mode: keep pages off loopback, private, link-local (cloud metadata), CGNAT and unspecified addresses, IPv4 and IPv6 (true or false; off for local use; in Kubernetes the NetworkPolicy does this for pods)',
    ),
  BROWSERPLANE_ALLOWED_PRIVATE_NETWORKS: optionalString
    .refine((v) => {
      try {
        parseAllowedNetworks(v);
        return true;
      } catch {
        return false;
      }
    }, 'comma-separated IP addresses and CIDRs')
    .describe('With BROWSERPLANE_BLOCK_PRIVATE_NETWORKS: addresses and CIDRs pages may reach anyway, comma-separated (an internal site, an in-network proxy)'),
  ...browserFsLimitFields,
  ...appJobFields,
  ...liveViewFields,
  ...replayFields,
  ...storageFields,
  ...auditLogFields,
  ...telemetryFields,
  ...credentialProviderFields,
  ...extensionConfigFields,
  BROWSERPLANE_SESSION_UID_BASE: z.coerce
    .number()
    .int()
    .min(1000)
    .max(2 ** 31 - 2)
    .default(1_200_000)
    .describe('Embedded mode as root: the first of the uids browsers run as, one per session at a time (no /etc/passwd entries needed)'),
  BROWSERPLANE_SESSION_UID_COUNT: z.coerce
    .number()
    .int()
    .min(1)
    .max(1_000_000)
    .default(1000)
    .describe('Embedded mode as root: how many session uids there are, i.e. how many browsers can run at once'),
  BROWSERPLANE_RUNTIME: z
    .enum(['local', 'kubernetes'])
    .default('local')
    .describe('Where browsers run: local (agent processes on this host) or kubernetes (BrowserSession resources the operator turns into pods)'),
  BROWSERPLANE_NAMESPACE: optionalString
    .pipe(z.string().max(63).regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, 'a Kubernetes namespace name (DNS-1123 label)').optional())
    .describe('Kubernetes mode: the namespace of the BrowserSession resources (default: POD_NAMESPACE, else default)'),
  POD_NAMESPACE: optionalString.describe('The namespace this pod runs in (the chart sets it from the Downward API)'),
  BROWSERPLANE_INTERNAL_URL: optionalString
    .pipe(z.url({ protocol: /^https?$/ }).optional())
    .describe('Base URL browser agents reach this service at (profile downloads and saves); default: the loopback address it listens on. Kubernetes mode: the API Service URL'),
  BROWSERPLANE_POSTGRES_RESTART_LIMIT: positiveInt(1000)
    .default(DEFAULT_RESTART_POLICY.limit)
    .describe(
      'Embedded Postgres: failures (an unexpected exit or a failed restart) within the window after which it is no longer restarted and /healthz fails',
    ),
  BROWSERPLANE_POSTGRES_RESTART_WINDOW_SECONDS: positiveInt(86_400)
    .default(DEFAULT_RESTART_POLICY.windowMs / 1000)
    .describe('Embedded Postgres: the window, in seconds, over which its failures are counted'),
  LOG_LEVEL: z
    .enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'])
    .default('info')
    .describe('pino log level'),
  BROWSERPLANE_LOG_FORMAT: z
    .enum(LOG_FORMATS)
    .default('auto')
    .describe('Log output: json (one JSON object a line), pretty (readable, coloured), or auto: pretty when stdout is a terminal, else json'),
});

export type Config = z.output<typeof configSchema> & {
  dataDir: string;
  /** Kubernetes mode's namespace: BROWSERPLANE_NAMESPACE, else the pod's own, else 'default'. */
  namespace: string;
};

/** The database timeouts the settings give (db/pool.ts). */
export function databaseTimeouts(config: Config): DatabaseTimeouts {
  return { connectMs: config.DATABASE_CONNECT_TIMEOUT_MS, queryMs: config.DATABASE_QUERY_TIMEOUT_MS };
}

/** The browser file API's limits as the agent's AGENT_FS_* variables (agent/src/config.ts). */
export type BrowserFsLimits = { [K in keyof typeof browserFsLimitFields]: z.infer<(typeof browserFsLimitFields)[K]> };

export function agentFsEnv(config: BrowserFsLimits): Record<`AGENT_${'FS' | 'LOGS'}_${string}`, string> {
  return {
    AGENT_FS_QUOTA_MB: String(config.BROWSERPLANE_BROWSER_DISK_QUOTA_MB),
    AGENT_FS_ZIP_MAX_MB: String(config.BROWSERPLANE_BROWSER_ZIP_MAX_MB),
    AGENT_FS_ZIP_MAX_ENTRIES: String(config.BROWSERPLANE_BROWSER_ZIP_MAX_ENTRIES),
    AGENT_FS_ZIP_MAX_RATIO: String(config.BROWSERPLANE_BROWSER_ZIP_MAX_RATIO),
    AGENT_FS_MAX_DEPTH: String(config.BROWSERPLANE_BROWSER_FS_MAX_DEPTH),
    AGENT_FS_MAX_WALK_ENTRIES: String(config.BROWSERPLANE_BROWSER_FS_MAX_WALK_ENTRIES),
    AGENT_LOGS_MAX_STREAMS: String(config.BROWSERPLANE_BROWSER_LOG_STREAMS_MAX),
    AGENT_LOGS_LINE_KB: String(config.BROWSERPLANE_BROWSER_LOG_LINE_KB),
    AGENT_LOGS_TAIL_LINES: String(config.BROWSERPLANE_BROWSER_LOG_TAIL_LINES),
    AGENT_LOGS_TAIL_KB: String(config.BROWSERPLANE_BROWSER_LOG_TAIL_KB),
    AGENT_LOGS_RING_LINES: String(config.BROWSERPLANE_BROWSER_LOG_RING_LINES),
    AGENT_LOGS_RING_KB: String(config.BROWSERPLANE_BROWSER_LOG_RING_KB),
  };
}

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`Invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
  }
}

// Proxy URLs may carry a password (http://user:pass@host).
const SECRET_VARIABLES = new Set(['BROWSERPLANE_API_KEY', 'DATABASE_URL', 'BROWSERPLANE_ENCRYPTION_KEY', 'BROWSERPLANE_PROXY_UPSTREAMS', 'BROWSERPLANE_APP_HTTP_PROXY', 'BROWSERPLANE_APP_HTTPS_PROXY']);

/** Parses the environment; every invalid variable is reported together. */
export function parseConfig(env: NodeJS.ProcessEnv, cwd = process.cwd()): Config {
  const known = Object.fromEntries(Object.keys(configSchema.shape).map((k) => [k, env[k]]));
  const result = configSchema.safeParse(known);
  if (!result.success) {
    const problems = result.error.issues.map((issue) => {
      const name = String(issue.path[0] ?? '?');
      const given = env[name];
      const shown = SECRET_VARIABLES.has(name) ? '(hidden)' : JSON.stringify(given);
      return `${name}: ${issue.message} (given ${shown}; expected ${describeExpected(name)})`;
    });
    throw new ConfigError(problems);
  }
  const lastUid = result.data.BROWSERPLANE_SESSION_UID_BASE + result.data.BROWSERPLANE_SESSION_UID_COUNT - 1;
  if (lastUid > 2 ** 31 - 2) {
    throw new ConfigError([`BROWSERPLANE_SESSION_UID_COUNT: the range ends at uid ${lastUid}, past ${2 ** 31 - 2} (lower BROWSERPLANE_SESSION_UID_BASE or the count)`]);
  }
  return {
    ...result.data,
    dataDir: path.resolve(cwd, result.data.BROWSERPLANE_DATA_DIR),
    namespace: result.data.BROWSERPLANE_NAMESPACE ?? result.data.POD_NAMESPACE ?? 'default',
  };
}

function describeExpected(name: string): string {
  const field = configSchema.shape[name as keyof typeof configSchema.shape];
  return field?.description ?? 'a valid value';
}

/** The text `--help` prints: every variable with its default and meaning. */
export function configHelp(): string {
  return [
    'Usage: browserplane [--help | --version]',
    '',
    'Starts the Browserplane API in embedded mode. Configuration comes from the environment:',
    '',
    ...describeVariables(configSchema),
  ].join('\n');
}
