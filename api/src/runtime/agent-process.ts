import { spawn, type ChildProcess } from 'node:child_process';
import { open, readdir, readFile } from 'node:fs/promises';
import net from 'node:net';
import type { BrowserLaunchSpec } from '../../../contract/browser-runtime.js';
import { parsePort } from '../../../lib/port-file.js';
import { egressEnv } from '../../../contract/egress.js';

/**
 * Starting, probing and reading the agent as a child process. The agent's stdout goes to
 * a log file, not a pipe: a pipe would break (EPIPE) when the service restarts, and the
 * agent must outlive the service to be re-adopted.
 */


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
 * with no flags, 18.7 MiB with --single-threaded, 16-17 MiB with --optimize-for-size too.
 * --jitless (V8 interprets, allocates no executable memory) takes 3-4 MiB more off an
 * agent that has relayed CDP traffic (19 → 15 MiB USS after 1,000 Runtime.evaluate round
 * trips and 200 100-KB answers), and costs no measurable CPU on that relay (agent CPU
 * 320-500 ms against 420-600 ms for the 1,000 round trips, 180-190 against 120-190 ms for
 * the large ones; the work is JSON and socket I/O, native either way). Without a JIT there
 * is no WebAssembly, so the global fetch() (undici's parser is WebAssembly) throws: the
 * agent speaks HTTP with node:http. Node 20's V8 notes that once on stderr (the agent's
 * log: "disabling flag --expose_wasm"); --no-expose-wasm would silence it there but is
 * an unknown option to Node 24, which the browser image runs. docker/browser.Dockerfile
 * starts the agent of a browser pod with the same flags.
 */
export const AGENT_NODE_FLAGS = ['--single-threaded', '--optimize-for-size', '--jitless'];

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
  /** BROWSERPLANE_BLOCK_PRIVATE_NETWORKS and its allow list, for the agent's forwarder (contract/egress.ts). */
  egress?: { blockPrivateNetworks: boolean; allowedNetworks?: string | undefined };
  /** AGENT_FS_* limits of the file API (agent/src/config.ts parseFsLimits). */
  fsEnv?: Record<`AGENT_${'FS' | 'LOGS'}_${string}`, string>;
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
 * The port an agent started on port 0 reported (lib/port-file.ts), or undefined while
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
