import type { BrowserLaunchSpec } from '../../contract/launch-spec.js';
import { parseEgressEnv, type EgressRules } from '../../contract/egress.js';
import { plainLaunchSpec } from './plain-input.js';
import { parseLogLimits, type LogLimits } from './logs/limits.js';

/**
 * The agent is configured by its environment alone, because the same code runs as a
 * child process of the service and as a pod's container: AGENT_SPEC carries the launch
 * settings as JSON, the other variables say where to serve and where to work.
 */

class ConfigError extends Error {}

const fail = (message: string): never => {
  throw new ConfigError(message);
};

/**
 * The launch spec as the contract's schema (the same one the operator reads the launch
 * Secret with) returns it, its defaults filled in. A plain spec is read without zod
 * (plain-input.ts); anything else goes through the schema itself, loaded then, which
 * decides and words the error.
 */
export async function parseLaunchSpec(raw: unknown): Promise<BrowserLaunchSpec> {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return fail('AGENT_SPEC must be a JSON object');
  const plain = plainLaunchSpec(raw);
  if (plain) return plain;
  const { browserLaunchSpecSchema, issuesText } = await import('../../contract/launch-spec.js');
  const parsed = browserLaunchSpecSchema.safeParse(raw);
  return parsed.success ? parsed.data : fail(issuesText(parsed.error, 'AGENT_SPEC'));
}

function envInteger(env: NodeJS.ProcessEnv, name: string, fallback: number, range: { min: number; max: number }): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  return Number.isInteger(value) && value >= range.min && value <= range.max ? value : fail(`${name} must be an integer in ${range.min}..${range.max}`);
}

export interface AgentConfig {
  spec: BrowserLaunchSpec;
  /**
   * AGENT_TOKEN: the secret every request to the agent presents (see access.ts). The
   * runtime derives it per browser; a standby agent gets it with its claim.
   */
  token: string;
  host: string;
  /** 0 lets the system choose; the chosen port is in the 'listening' log line and the port file. */
  port: number;
  /**
   * AGENT_PORT_FILE: where the agent writes the port it listens on, once it does. The local
   * runtime starts agents on port 0 and reads this: a port picked beforehand and handed
   * over could be taken by another socket in between (EADDRINUSE under load).
   */
  portFile?: string;
  /** Per-browser directory (user data, HOME, TMPDIR); removed on shutdown. Default: a fresh temp dir. */
  workDir?: string;
  chromePath?: string;
  /** The unprivileged user Chromium runs as when the agent runs as root (without chromiumUid). */
  chromiumUser: string;
  /**
   * AGENT_CHROMIUM_UID: as root, Chromium runs as this uid and gid instead (no passwd entry
   * needed). The local runtime gives each session its own, from its pool.
   */
  chromiumUid?: number;
  /** How long Chromium gets to exit after Browser.close before its process group is killed. */
  shutdownGraceMs: number;
  /** How long Chromium gets to open its DevTools endpoint. */
  startTimeoutMs: number;
  /**
   * With no /health request and no client for this long, the agent takes its service for
   * gone for good and shuts down (0: never). The service's reaper asks every 5 s.
   */
  orphanTimeoutMs: number;
  /**
   * AGENT_BLOCK_PRIVATE_NETWORKS=1 keeps the browser's traffic off loopback, private and
   * link-local addresses, except AGENT_ALLOWED_NETWORKS (comma-separated addresses and
   * CIDRs); see egress.ts. Set by the service from BROWSERPLANE_BLOCK_PRIVATE_NETWORKS.
   */
  egress: EgressRules;
  logLevel: string;
  /** Limits of the browser file API (agent/src/fs). */
  fsLimits: FsLimits;
  /** Limits of the log streams (agent/src/logs). */
  logLimits: LogLimits;
}

/**
 * Per-browser limits of the file API (agent/src/fs/README.md says how each is applied).
 * Sizes are in MiB in the environment; 0 turns the quota off.
 */
export interface FsLimits {
  /** AGENT_FS_QUOTA_MB: bytes the browser's files ("/", Downloads included) may take. */
  quotaBytes: number;
  /** AGENT_FS_ZIP_MAX_MB: total uncompressed size of one upload_zip. */
  zipMaxBytes: number;
  /** AGENT_FS_ZIP_MAX_ENTRIES: entries in one upload_zip. */
  zipMaxEntries: number;
  /** AGENT_FS_ZIP_MAX_RATIO: uncompressed size over the zip's size, for zips expanding past 1 MiB. */
  zipMaxRatio: number;
  /** AGENT_FS_MAX_DEPTH: path components below "/" any path may have. */
  maxDepth: number;
  /** AGENT_FS_MAX_WALK_ENTRIES: entries one directory walk (download_dir_zip, the quota's measure) visits. */
  maxWalkEntries: number;
}

const MIB = 1024 * 1024;

/** Per-browser limits of process execution (docs/processes.md says how each is applied). */
export interface ProcessLimits {
  /** AGENT_PROCESS_MAX_RUNNING: processes (exec and spawn) running at once. */
  maxRunning: number;
  /** AGENT_PROCESS_OUTPUT_KB: output a spawned process keeps for its stream, and exec's cap per stream. */
  outputBytes: number;
  /** AGENT_PROCESS_EXEC_TIMEOUT_SEC: exec's timeout when the caller gives none. */
  execTimeoutSec: number;
  /** AGENT_PROCESS_EXEC_TIMEOUT_MAX_SEC: the longest timeout exec takes (the service waits 300 s for an answer). */
  execTimeoutMaxSec: number;
  /** AGENT_PROCESS_STDIN_KB: bytes one stdin request may write. */
  stdinBytes: number;
  /** AGENT_PROCESS_KEEP_EXITED: exited processes whose status and output stay readable. */
  keepExited: number;
  /** AGENT_PROCESS_MAX_TASKS: RLIMIT_NPROC of each process: tasks of the browser's uid (Chromium's count) it may fork up to. */
  maxTasks: number;
}

export function parseProcessLimits(env: NodeJS.ProcessEnv): ProcessLimits {
  return {
    maxRunning: envInteger(env, 'AGENT_PROCESS_MAX_RUNNING', 16, { min: 1, max: 1024 }),
    outputBytes: envInteger(env, 'AGENT_PROCESS_OUTPUT_KB', 1024, { min: 1, max: 64 * 1024 }) * 1024,
    execTimeoutSec: envInteger(env, 'AGENT_PROCESS_EXEC_TIMEOUT_SEC', 60, { min: 1, max: 280 }),
    execTimeoutMaxSec: envInteger(env, 'AGENT_PROCESS_EXEC_TIMEOUT_MAX_SEC', 240, { min: 1, max: 280 }),
    stdinBytes: envInteger(env, 'AGENT_PROCESS_STDIN_KB', 1024, { min: 1, max: 16 * 1024 }) * 1024,
    keepExited: envInteger(env, 'AGENT_PROCESS_KEEP_EXITED', 16, { min: 0, max: 10_000 }),
    maxTasks: envInteger(env, 'AGENT_PROCESS_MAX_TASKS', 512, { min: 64, max: 1_000_000 }),
  };
}

export function parseFsLimits(env: NodeJS.ProcessEnv): FsLimits {
  return {
    quotaBytes: envInteger(env, 'AGENT_FS_QUOTA_MB', 1024, { min: 0, max: 16 * 1024 * 1024 }) * MIB,
    zipMaxBytes: envInteger(env, 'AGENT_FS_ZIP_MAX_MB', 512, { min: 1, max: 16 * 1024 * 1024 }) * MIB,
    zipMaxEntries: envInteger(env, 'AGENT_FS_ZIP_MAX_ENTRIES', 10_000, { min: 1, max: 10_000_000 }),
    zipMaxRatio: envInteger(env, 'AGENT_FS_ZIP_MAX_RATIO', 100, { min: 1, max: 1_000_000 }),
    maxDepth: envInteger(env, 'AGENT_FS_MAX_DEPTH', 64, { min: 1, max: 2048 }),
    maxWalkEntries: envInteger(env, 'AGENT_FS_MAX_WALK_ENTRIES', 100_000, { min: 1, max: 100_000_000 }),
  };
}

/** Everything but the launch settings: what a standby agent knows before it is claimed. */
export type StandbyConfig = Omit<AgentConfig, 'spec' | 'workDir' | 'token'>;

/** AGENT_STANDBY=1: start without a spec and wait to be claimed (see standby.ts). */
export const isStandby = (env: NodeJS.ProcessEnv) => env.AGENT_STANDBY === '1';

/**
 * The secret a standby agent's claim must carry (AGENT_STANDBY_TOKEN). Claiming one
 * chooses the spec and the work dir of a process that runs as root in embedded mode, so
 * another local user must not be able to.
 */
export function parseStandbyToken(env: NodeJS.ProcessEnv): string {
  return parseToken(env.AGENT_STANDBY_TOKEN, 'AGENT_STANDBY_TOKEN (32 to 256 URL-safe characters) is required with AGENT_STANDBY=1');
}

/** A token as the runtime makes them: 32 to 256 URL-safe characters. */
export function parseToken(raw: unknown, problem: string): string {
  return typeof raw === 'string' && /^[A-Za-z0-9_-]{32,256}$/.test(raw) ? raw : fail(problem);
}

/** A session uid: unprivileged (1000 and up) and below 2^31 - 1, which some tools read as signed. */
export function parseChromiumUid(raw: unknown, field: string): number {
  const value = typeof raw === 'string' && /^\d+$/.test(raw) ? Number(raw) : raw;
  return Number.isInteger(value) && (value as number) >= 1000 && (value as number) < 2 ** 31 - 1 ? (value as number) : fail(`${field} must be an integer in 1000..${2 ** 31 - 2}`);
}

export function parseStandbyConfig(env: NodeJS.ProcessEnv): StandbyConfig {
  const chromiumUser = env.AGENT_CHROMIUM_USER || 'browserplane';
  if (!/^[a-z_][a-z0-9_-]*$/.test(chromiumUser)) fail('AGENT_CHROMIUM_USER is not a valid user name');
  return {
    host: env.AGENT_HOST || '127.0.0.1',
    port: envInteger(env, 'AGENT_PORT', 0, { min: 0, max: 65535 }),
    portFile: env.AGENT_PORT_FILE || undefined,
    chromePath: env.CHROME_PATH || undefined,
    chromiumUser,
    ...(env.AGENT_CHROMIUM_UID ? { chromiumUid: parseChromiumUid(env.AGENT_CHROMIUM_UID, 'AGENT_CHROMIUM_UID') } : {}),
    shutdownGraceMs: envInteger(env, 'AGENT_SHUTDOWN_GRACE_MS', 5000, { min: 0, max: 600_000 }),
    startTimeoutMs: envInteger(env, 'AGENT_START_TIMEOUT_MS', 30_000, { min: 1, max: 600_000 }),
    orphanTimeoutMs: envInteger(env, 'AGENT_ORPHAN_TIMEOUT_MS', 600_000, { min: 0, max: 2_592_000_000 }),
    egress: parseEgressEnv(env),
    logLevel: env.LOG_LEVEL || 'info',
    fsLimits: parseFsLimits(env),
    logLimits: parseLogLimits(env),
  };
}

export async function parseAgentConfig(env: NodeJS.ProcessEnv): Promise<AgentConfig> {
  if (!env.AGENT_SPEC) fail('AGENT_SPEC (JSON launch settings) is required');
  let specJson: unknown;
  try {
    specJson = JSON.parse(env.AGENT_SPEC!);
  } catch {
    fail('AGENT_SPEC is not valid JSON');
  }
  return {
    ...parseStandbyConfig(env),
    spec: await parseLaunchSpec(specJson),
    token: parseToken(env.AGENT_TOKEN, 'AGENT_TOKEN (32 to 256 URL-safe characters) is required'),
    workDir: env.AGENT_WORK_DIR || undefined,
  };
}
