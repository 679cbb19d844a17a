import { spawn, type ChildProcess } from 'node:child_process';
import { open, readdir, readFile } from 'node:fs/promises';
import net from 'node:net';
import { BrowserResetError, BrowserSettingsError, type BrowserLaunchSpec, type BrowserResetReport, type BrowserRuntime, type LiveBrowserSettings, type ObservedBrowser } from '../ports/browser-runtime.js';
import { parsePort } from '../../../agent/src/port-file.js';
import { egressEnv } from '../../../agent/src/egress.js';
import { agentFetch, agentHeaders, type AgentEndpoint, type AgentTokens } from './agent-client.js';

/**
 * Starting, probing and reading the agent as a child process. The agent's stdout goes to
 * a log file, not a pipe: a pipe would break (EPIPE) when the service restarts, and the
 * agent must outlive the service to be re-adopted.
 */

export interface AgentHealth {
  status: 'standby' | 'starting' | 'ready' | 'stopping';
  browser_id: string;
  browser: { version: string; pid: number; sandbox: boolean } | null;
  connections: number;
  idle_since: string | null;
}

export interface AgentExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/**
 * V8 flags for the agent, one Node process per browser: an agent is idle nearly all the
 * time, so background compiler and GC threads and eager optimisation buy nothing and each
 * cost memory. Measured here (unshared memory of an idle agent, 3 runs each): 27-30 MiB
 * with no flags, 18.7 MiB with --single-threaded, 16-17 MiB with both. --lite-mode and
 * --jitless save 2 MiB more but interpret everything, which slows the CDP pass-through.
 */
export const AGENT_NODE_FLAGS = ['--single-threaded', '--optimize-for-size'];

/**
 * Starts an agent for `spec` in `workDir`, or, without them, a standby agent that waits
 * for POST /start (agent/src/standby.ts).
 */
export async function spawnAgent(options: {
  agentEntry: string;
  spec?: BrowserLaunchSpec;
  /** With a spec: the browser's agent token (AGENT_TOKEN), which every request must present. */
  agentToken?: string;
  /** For a standby agent (no spec): the secret its claim must carry. */
  standbyToken?: string;
  port: number;
  /** Where the agent writes the port it listens on (with port 0): see readReportedPort. */
  portFile?: string;
  workDir?: string;
  /** The session's own uid for Chromium (uid-pool.ts). */
  chromiumUid?: number;
  logFile: string;
  chromePath?: string;
  logLevel: string;
  /** BROWSERPLANE_BLOCK_PRIVATE_NETWORKS and its allow list, for the agent's forwarder (agent/src/egress.ts). */
  egress?: { blockPrivateNetworks: boolean; allowedNetworks?: string | undefined };
  /** AGENT_FS_* limits of the file API (agent/src/config.ts parseFsLimits). */
  fsEnv?: Record<`AGENT_FS_${string}`, string>;
}): Promise<ChildProcess> {
  const log = await open(options.logFile, 'a', 0o600);
  try {
    // Only what the agent needs: the service's environment holds database URLs and keys.
    const env: NodeJS.ProcessEnv = {
      PATH: process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin',
      LANG: process.env.LANG ?? 'C.UTF-8',
      ...(options.spec
        ? { AGENT_SPEC: JSON.stringify(options.spec), AGENT_TOKEN: options.agentToken ?? '' }
        : { AGENT_STANDBY: '1', AGENT_PARENT_PID: String(process.pid), AGENT_STANDBY_TOKEN: options.standbyToken ?? '' }),
      AGENT_HOST: '127.0.0.1',
      AGENT_PORT: String(options.port),
      ...(options.portFile ? { AGENT_PORT_FILE: options.portFile } : {}),
      ...(options.workDir ? { AGENT_WORK_DIR: options.workDir } : {}),
      ...(options.chromiumUid !== undefined ? { AGENT_CHROMIUM_UID: String(options.chromiumUid) } : {}),
      LOG_LEVEL: options.logLevel,
      ...(options.chromePath ? { CHROME_PATH: options.chromePath } : {}),
      ...(options.egress ? egressEnv(options.egress) : {}),
      ...options.fsEnv,
    };
    const child = spawn(process.execPath, [...AGENT_NODE_FLAGS, options.agentEntry], {
      // Its own process group, so terminate can kill the agent and anything it left.
      detached: true,
      stdio: ['ignore', log.fd, log.fd],
      env,
    });
    // The service may exit (or restart) without waiting for its browsers.
    child.unref();
    return child;
  } finally {
    await log.close();
  }
}

/**
 * The port an agent started on port 0 reported (agent/src/port-file.ts), or undefined while
 * it has not yet. Agents choose their own port: one picked here and handed over could be
 * taken by another socket before the agent binds it, which happened at about 50 browsers.
 */
export async function readReportedPort(file: string): Promise<number | undefined> {
  try {
    return parsePort(await readFile(file, 'utf8'));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
}

export async function fetchHealth(agent: AgentEndpoint, timeoutMs: number): Promise<AgentHealth | undefined> {
  try {
    const response = await agentFetch(agent, '/health', { signal: AbortSignal.timeout(timeoutMs) });
    return (await response.json()) as AgentHealth;
  } catch {
    return undefined;
  }
}

/**
 * Claims a standby agent (`standby`: its URL and standby token) for `spec`, handing it the
 * browser's agent token and the uid its Chromium runs as; false when it did not take it
 * (then it should be killed).
 */
export async function claimStandbyAgent(standby: AgentEndpoint, agentToken: string, spec: BrowserLaunchSpec, workDir: string, chromiumUid?: number): Promise<boolean> {
  try {
    const response = await fetch(`${standby.url}/start`, {
      method: 'POST',
      headers: agentHeaders(standby, { 'content-type': 'application/json' }),
      body: JSON.stringify({ spec, workDir, token: agentToken, ...(chromiumUid !== undefined ? { chromiumUid } : {}) }),
      signal: AbortSignal.timeout(2000),
    });
    await response.body?.cancel();
    return response.status === 202;
  } catch {
    return false;
  }
}

/** POST /settings: the agent applies them to the running browser or says why not. */
export async function postAgentSettings(agent: AgentEndpoint, settings: LiveBrowserSettings): Promise<{ ok: true } | { ok: false; message: string }> {
  try {
    const response = await agentFetch(agent, '/settings', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(settings),
      signal: AbortSignal.timeout(15_000),
    });
    const body = (await response.json().catch(() => ({}))) as { message?: unknown };
    if (response.ok) return { ok: true };
    return { ok: false, message: typeof body.message === 'string' ? body.message : `the agent answered ${response.status}` };
  } catch (error) {
    return { ok: false, message: `the agent did not answer: ${error instanceof Error ? error.message : String(error)}` };
  }
}

/** How long a reset may take before the browser is given up on (measured: well under 1 s). */
export const RESET_TIMEOUT_MS = 10_000;

/**
 * POST /reset: the agent makes the browser fit for its next holder and reports what it
 * did, or says why it could not (agent/src/reset.ts).
 */
export async function postAgentReset(
  agent: AgentEndpoint,
  options: { startUrl?: string; signal?: AbortSignal },
): Promise<{ ok: true; report: BrowserResetReport } | { ok: false; message: string }> {
  const signals = [AbortSignal.timeout(RESET_TIMEOUT_MS), ...(options.signal ? [options.signal] : [])];
  try {
    const response = await agentFetch(agent, '/reset', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(options.startUrl !== undefined ? { start_url: options.startUrl } : {}),
      signal: AbortSignal.any(signals),
    });
    const body = (await response.json().catch(() => ({}))) as Record<string, unknown>;
    if (!response.ok) return { ok: false, message: typeof body.message === 'string' ? body.message : `the agent answered ${response.status}` };
    const count = (key: string) => (typeof body[key] === 'number' ? body[key] : 0);
    return {
      ok: true,
      report: {
        closedConnections: count('closed_connections'),
        closedTargets: count('closed_targets'),
        disposedContexts: count('disposed_contexts'),
        cookiesRestored: count('cookies_restored'),
      },
    };
  } catch (error) {
    return { ok: false, message: `the agent did not finish the reset: ${error instanceof Error ? error.message : String(error)}` };
  }
}

/** Asks the agent to close Chromium cleanly; false when it did not answer. */
export async function requestAgentShutdown(agent: AgentEndpoint, graceMs: number, options = { saveProfile: true }): Promise<boolean> {
  try {
    const response = await agentFetch(agent, '/shutdown', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ grace_ms: graceMs, save_profile: options.saveProfile }),
      signal: AbortSignal.timeout(1000),
    });
    await response.body?.cancel();
    return response.status === 202;
  } catch {
    return false;
  }
}

/** The agent's own words on why it stopped: the reason of its last error or exit line. */
export async function lastAgentWords(logFile: string): Promise<string | undefined> {
  const text = await readFile(logFile, 'utf8').catch(() => '');
  let words: string | undefined;
  for (const line of text.split('\n').slice(-200)) {
    if (!line.startsWith('{')) continue;
    try {
      const entry = JSON.parse(line) as { level?: string; msg?: string; err?: { message?: string } };
      if (entry.level === 'error' || entry.level === 'fatal') words = entry.err?.message ? `${entry.msg}: ${entry.err.message}` : entry.msg;
    } catch {
      continue;
    }
  }
  return words;
}

export function describeExit(exit: AgentExit): string {
  return exit.signal ? `agent killed by ${exit.signal}` : `agent exited with code ${exit.code}`;
}

/** Is `pid` alive and still the process we started (its command line names `marker`)? */
export async function isProcessOf(pid: number, marker: string): Promise<boolean> {
  const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
  return cmdline.split('\0').some((arg) => arg.includes(marker));
}

/**
 * Process groups of every process whose command line mentions `dir`: Chromium's
 * --user-data-dir names the work dir, so this finds a browser whose agent died before
 * it could report Chromium's pid.
 */
export async function processGroupsMentioning(dir: string): Promise<number[]> {
  const groups = new Set<number>();
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const cmdline = await readFile(`/proc/${entry}/cmdline`, 'utf8').catch(() => '');
    if (!cmdline.includes(`${dir}/`)) continue;
    const stat = await readFile(`/proc/${entry}/stat`, 'utf8').catch(() => '');
    const pgid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[2]);
    if (pgid > 1) groups.add(pgid);
  }
  return [...groups];
}

/**
 * Process groups of agents started for `workDir` (AGENT_WORK_DIR in their environment;
 * `agentEntry` on their command line): finds an agent whose pid never reached its
 * record because the service was killed right after spawning it.
 */
export async function agentGroupsStartedFor(workDir: string, agentEntry: string): Promise<number[]> {
  const groups: number[] = [];
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    if (!(await isProcessOf(Number(entry), agentEntry))) continue;
    const environ = await readFile(`/proc/${entry}/environ`, 'utf8').catch(() => '');
    if (!environ.split('\0').includes(`AGENT_WORK_DIR=${workDir}`)) continue;
    // Spawned detached: the agent leads its own process group.
    groups.push(Number(entry));
  }
  return groups;
}

/**
 * The port's applySettings and reset for runtimes that place agents elsewhere (pods): the
 * agent is the same everywhere, so both ask it directly at the URL its browser is observed at.
 */
export function agentControls(observe: (browserId: string) => Promise<ObservedBrowser | undefined>, tokens: AgentTokens): Pick<BrowserRuntime, 'applySettings' | 'reset'> {
  const readyAgent = async (browserId: string, error: new (message: string) => Error): Promise<AgentEndpoint> => {
    const current = await observe(browserId);
    if (current?.phase !== 'Ready' || !current.agentUrl) throw new error(`browser ${browserId} is not running`);
    return { url: current.agentUrl, token: tokens(browserId) };
  };
  return {
    async applySettings(browserId, settings) {
      const answer = await postAgentSettings(await readyAgent(browserId, BrowserSettingsError), settings);
      if (!answer.ok) throw new BrowserSettingsError(answer.message);
    },
    async reset(browserId, { startUrl, signal }) {
      const answer = await postAgentReset(await readyAgent(browserId, BrowserResetError), {
        ...(startUrl !== undefined ? { startUrl } : {}),
        ...(signal ? { signal } : {}),
      });
      if (!answer.ok) throw new BrowserResetError(answer.message);
      return answer.report;
    },
  };
}
