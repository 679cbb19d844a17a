import { spawn, execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { realpathSync } from 'node:fs';
import { chmod, chown, mkdir, readdir, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { pino, type Logger } from 'pino';
import { UidPool, type UidRange } from '../../runtime/uid-pool.js';

/**
 * Where an app's untrusted code runs: `npm ci` of a deployment (its install scripts) and
 * the app's actions. As root (embedded mode), each run gets a uid of its own for its
 * lifetime (an app-run pool, separate from the browsers' session uids: a run must not be
 * able to signal or read a browser, and runs never share a uid at the same time, so one
 * cannot ptrace, signal or read the scratch of another), then:
 *
 *   setpriv --reuid U --regid U --clear-groups --no-new-privs --
 *     prlimit --nproc=N --fsize=F --
 *       bwrap --unshare-user --unshare-pid --unshare-ipc --unshare-uts --new-session --die-with-parent
 *             (empty root) + /usr ro + /etc pieces ro + node's prefix ro + readable ro + writable rw
 *             + the run's scratch as /tmp + /dev + /proc
 *
 * setpriv drops root before bwrap, so every path bwrap opens is opened as the run's uid
 * (the same order as agent/src/process/sandbox.ts). The data dir (Postgres files, keys,
 * other builds and other runs' scratch) is not in the run's tree at all: only the dirs the
 * caller names are bound, at the same paths as on the host, so an entry path means the same
 * inside and out. The network is the host's: an action must reach the service on loopback
 * (docs/apps.md says what else that reaches).
 *
 * Without user namespaces bwrap cannot work: a root service refuses (nothing else keeps
 * the code off the host), a non-root service runs the code unconfined as itself with an
 * error in the log (as the agent does in a browser pod, docs/apps.md). A non-root service
 * with user namespaces still uses bwrap, without the uid switch: runs then share the
 * service's uid, but each sees its own pid namespace and its own files only.
 */

export type LogStream = 'stdout' | 'stderr';

export interface SandboxRunOptions {
  command: string;
  args: string[];
  /** Working directory, a path inside (the same as on the host when it is a bound dir). */
  cwd: string;
  /** Bound read-write; as root they are handed to the run's uid for the run and back to root (0:0) after. */
  writable: string[];
  /** Bound read-only; the run's uid must be able to reach them (world-searchable parents, world-readable files). */
  readable: string[];
  env: Record<string, string>;
  timeoutMs: number;
  signal?: AbortSignal;
  onLog?: (stream: LogStream, line: string) => void;
  /** false: a network namespace of its own (loopback only, nothing listens there). */
  network: boolean;
  dataDir: string;
  /** Opens fd 3 as a pipe the code may write its result to (the runner does); returned as `result`. */
  resultFd?: boolean;
  /** Written to the code's stdin, which is then closed (default: no stdin). */
  stdin?: string;
}

export interface SandboxResult {
  code: number | null;
  signal: string | null;
  timedOut: boolean;
  /** What the code wrote to fd 3, when resultFd was asked (capped at MAX_RESULT_BYTES). */
  result?: string;
}

export class SandboxUnavailableError extends Error {}

/** Defaults of the limits; docs/apps.md lists them. */
export const SANDBOX_LIMITS = {
  /** RLIMIT_NPROC of the run's uid: tasks, threads included (Node has ~11, npm runs a few Nodes). */
  maxProcesses: 512,
  /** RLIMIT_FSIZE: the largest file a run can write. */
  maxFileBytes: 1024 * 1024 * 1024,
  /** Log lines handed to onLog per run; past it one notice and nothing more. */
  maxLogLines: 10_000,
  /** A longer line is cut there. */
  maxLineBytes: 16 * 1024,
  maxResultBytes: 16 * 1024 * 1024,
};

/**
 * The app-run uid range: next to the session uids (1,200,000 + 1000, uid-pool.ts), far from
 * users and the first subordinate ranges. BROWSERPLANE_APP_UID_BASE / _COUNT change it.
 */
export const DEFAULT_APP_UIDS: UidRange = { base: 1_300_000, count: 1000 };
const APP_UID_LOCK_DIR = '/run/browserplane/app-uids';

const ETC_FILES = ['passwd', 'group', 'hosts', 'host.conf', 'resolv.conf', 'nsswitch.conf', 'gai.conf', 'ssl', 'ca-certificates', 'ca-certificates.conf', 'alternatives', 'ld.so.cache', 'ld.so.conf', 'ld.so.conf.d', 'localtime', 'timezone', 'mime.types', 'os-release', 'npmrc'];
const USR_LINKS = ['bin', 'lib', 'lib64', 'sbin'];
const SMALL_TMPFS_BYTES = 1024 * 1024;
const KILL_GRACE_MS = 2000;

let settings: { log: Logger; uids: UidRange; lockDir: string } | undefined;
let pool: UidPool | undefined;
let probed: Promise<boolean> | undefined;
let warnedUnconfined = false;

/** Called once by the service with its logger (and uid range); tests may skip it and get the defaults. */
export function configureSandbox(options: { log: Logger; uids?: UidRange; lockDir?: string }): void {
  settings = { log: options.log, uids: options.uids ?? uidRangeFromEnv(), lockDir: options.lockDir ?? APP_UID_LOCK_DIR };
  pool = undefined;
}

function uidRangeFromEnv(): UidRange {
  const base = Number(process.env.BROWSERPLANE_APP_UID_BASE ?? DEFAULT_APP_UIDS.base);
  const count = Number(process.env.BROWSERPLANE_APP_UID_COUNT ?? DEFAULT_APP_UIDS.count);
  return { base, count };
}

function current(): { log: Logger; uids: UidRange; lockDir: string } {
  settings ??= { log: pino({ level: 'warn' }), uids: uidRangeFromEnv(), lockDir: APP_UID_LOCK_DIR };
  return settings;
}

function uidPool(): UidPool {
  const { log, uids, lockDir } = current();
  pool ??= new UidPool(uids, log.child({ component: 'app-uids' }), lockDir);
  return pool;
}

const isRoot = (): boolean => process.getuid?.() === 0;

/** Whether bwrap can make its namespaces as an unprivileged uid here: asked once per process. */
export function sandboxAvailable(): Promise<boolean> {
  probed ??= new Promise<boolean>((resolve) => {
    const probeUid = current().uids.base;
    const drop = isRoot() ? ['setpriv', `--reuid=${probeUid}`, `--regid=${probeUid}`, '--clear-groups', '--no-new-privs', '--'] : [];
    const argv = [...drop, 'bwrap', '--unshare-user', '--unshare-pid', '--ro-bind', '/', '/', '--proc', '/proc', '--', '/usr/bin/true'];
    const child = spawn(argv[0]!, argv.slice(1), { stdio: 'ignore', env: {} });
    child.once('error', () => resolve(false));
    child.once('exit', (code) => resolve(code === 0));
  });
  return probed;
}

/** The apps dirs the runs' binds live under: searchable (not listable) by the run uids. */
export async function ensureAppsDirs(dataDir: string): Promise<{ apps: string; scratch: string }> {
  // The run's uid binds dirs under the data dir, so it must pass through it: search only,
  // as for the embedded Postgres's user (postgres-user.ts); its files stay 0600.
  const info = await stat(dataDir);
  if (isRoot() && (info.mode & 0o001) === 0) await chmod(dataDir, (info.mode & 0o777) | 0o711);
  const apps = path.join(dataDir, 'apps');
  const scratch = path.join(apps, 'scratch');
  for (const dir of [apps, scratch, path.join(apps, 'builds'), path.join(apps, 'sources')]) await mkdir(dir, { recursive: true, mode: 0o711 });
  return { apps, scratch };
}

/**
 * At start: the scratch dirs a killed service's runs left (their processes died with it).
 * Only at start, when no run of this data dir can be live (the data dir is claimed by one process).
 */
export async function clearScratch(dataDir: string): Promise<void> {
  const { scratch } = await ensureAppsDirs(dataDir);
  for (const entry of await readdir(scratch)) await rm(path.join(scratch, entry), { recursive: true, force: true });
}

/**
 * Node's install prefix when it lies outside /usr (nvm, a tarball under /opt): bound
 * read-only so `node` and `npm` exist inside. Its parents must be searchable by the run's uid.
 */
function nodePrefix(): string | undefined {
  const bin = path.dirname(realpathSync(process.execPath));
  if (bin === '/usr/bin' || bin.startsWith('/usr/')) return undefined;
  return path.basename(bin) === 'bin' ? path.dirname(bin) : bin;
}

/**
 * BROWSERPLANE_APP_SANDBOX=pod (the runner image): the process is an app Job's pod, which
 * is the sandbox (its own uid, read-only root, resource limits, no service account token),
 * so code runs directly: no bwrap, no uid switch, no prlimit, no "unconfined" error.
 */
const inPod = (): boolean => process.env.BROWSERPLANE_APP_SANDBOX === 'pod';

/**
 * What a pod's code inherits of the pod's environment: the egress proxy and the CA bundle
 * the API hands every app Job (npm, pip and git must go through them). Never the rest:
 * the Job's token is for the pod program alone.
 */
const POD_PASSED_ENV = ['HTTP_PROXY', 'HTTPS_PROXY', 'NO_PROXY', 'http_proxy', 'https_proxy', 'no_proxy', 'NODE_EXTRA_CA_CERTS', 'PIP_CERT', 'SSL_CERT_FILE', 'REQUESTS_CA_BUNDLE', 'GIT_SSL_CAINFO'];

function podEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const name of POD_PASSED_ENV) {
    const value = process.env[name];
    if (value !== undefined) env[name] = value;
  }
  return env;
}

export async function runSandboxed(options: SandboxRunOptions): Promise<SandboxResult> {
  const pod = inPod();
  const confined = pod ? false : await sandboxAvailable();
  if (!confined && !pod && isRoot()) {
    throw new SandboxUnavailableError(
      'app code needs bubblewrap with unprivileged user namespaces (kernel.unprivileged_userns_clone / user.max_user_namespaces), which this host refuses; the service runs as root and will not run app code unconfined',
    );
  }
  const { scratch: scratchRoot } = await ensureAppsDirs(options.dataDir);
  const runId = randomUUID();
  const scratch = path.join(scratchRoot, runId);
  await mkdir(scratch, { mode: 0o700 });
  const uid = isRoot() && !pod ? await uidPool().allocate(`app-run:${runId}`) : undefined;
  try {
    if (uid !== undefined) {
      await chown(scratch, uid, uid);
      for (const dir of options.writable) await chownTree(dir, uid);
    }
    return await spawnRun(options, { confined, uid, scratch, pod });
  } finally {
    if (uid !== undefined) {
      // Kill what is left of the uid first (nothing should be: the pid namespace died with bwrap).
      await uidPool().release(uid, `app-run:${runId}`);
      for (const dir of options.writable) await chownTree(dir, 0).catch((error: unknown) => current().log.error({ err: error, dir }, 'could not give a run\'s writable dir back to root'));
    }
    await rm(scratch, { recursive: true, force: true });
  }
}

/** chown -R without following links: a link the code planted must not hand it a host file. */
async function chownTree(dir: string, uid: number): Promise<void> {
  await promisify(execFile)('chown', ['-R', '-P', '-h', `${uid}:${uid}`, '--', dir]);
}

function launchArgv(options: SandboxRunOptions, uid: number | undefined, scratch: string): string[] {
  const drop = uid !== undefined ? ['setpriv', `--reuid=${uid}`, `--regid=${uid}`, '--clear-groups', '--no-new-privs', '--'] : [];
  // RLIMIT_NPROC counts the uid's tasks host-wide: only meaningful with a uid of the run's own.
  const nproc = uid !== undefined ? [`--nproc=${SANDBOX_LIMITS.maxProcesses}:${SANDBOX_LIMITS.maxProcesses}`] : [];
  const limit = ['prlimit', ...nproc, `--fsize=${SANDBOX_LIMITS.maxFileBytes}:${SANDBOX_LIMITS.maxFileBytes}`, '--'];
  const bwrap = ['bwrap', '--unshare-user', '--unshare-pid', '--unshare-ipc', '--unshare-uts', '--unshare-cgroup-try', '--new-session', '--die-with-parent', '--hostname', 'app'];
  if (!options.network) bwrap.push('--unshare-net');
  bwrap.push('--ro-bind', '/usr', '/usr');
  for (const link of USR_LINKS) bwrap.push('--ro-bind-try', `/${link}`, `/${link}`);
  bwrap.push('--size', String(SMALL_TMPFS_BYTES), '--tmpfs', '/etc');
  for (const name of ETC_FILES) bwrap.push('--ro-bind-try', `/etc/${name}`, `/etc/${name}`);
  bwrap.push('--dev', '/dev', '--proc', '/proc');
  // /tmp first: a bound dir that lies under the host's /tmp (a test's data dir) is mounted on top of it.
  bwrap.push('--bind', scratch, '/tmp');
  const prefix = nodePrefix();
  if (prefix) bwrap.push('--ro-bind', prefix, prefix);
  for (const dir of options.readable) bwrap.push('--ro-bind', dir, dir);
  for (const dir of options.writable) bwrap.push('--bind', dir, dir);
  // The root, /etc and /dev are tmpfs (memory): read-only once the mounts are made, so the
  // code writes to its dirs and /tmp (disk, its scratch) only.
  bwrap.push('--remount-ro', '/etc', '--remount-ro', '/dev', '--remount-ro', '/');
  bwrap.push('--chdir', options.cwd, '--', options.command, ...options.args);
  return [...drop, ...limit, ...bwrap];
}

function spawnRun(options: SandboxRunOptions, run: { confined: boolean; uid: number | undefined; scratch: string; pod: boolean }): Promise<SandboxResult> {
  const prefix = nodePrefix();
  const pathVar = [...(prefix ? [path.join(prefix, 'bin')] : []), '/usr/local/bin', '/usr/bin', '/bin'].join(':');
  let argv: string[];
  let cwd = '/';
  let env: Record<string, string>;
  if (run.confined) {
    argv = launchArgv(options, run.uid, run.scratch);
    // The code's variables go through the launchers' environment, not their argv: a
    // command line is world-readable in the host's /proc, an environment is not.
    env = { PATH: pathVar, LANG: 'C.UTF-8', HOME: '/tmp', TMPDIR: '/tmp', ...options.env };
  } else if (run.pod) {
    argv = [options.command, ...options.args];
    cwd = options.cwd;
    env = { PATH: pathVar, LANG: 'C.UTF-8', HOME: run.scratch, TMPDIR: run.scratch, ...podEnv(), ...options.env };
  } else {
    if (!warnedUnconfined) {
      warnedUnconfined = true;
      current().log.error('bubblewrap cannot make user namespaces here: app code (npm ci, actions) runs UNCONFINED as the service\'s own user, able to read the data dir (docs/apps.md)');
    }
    argv = [options.command, ...options.args];
    cwd = options.cwd;
    env = { PATH: pathVar, LANG: 'C.UTF-8', HOME: run.scratch, TMPDIR: run.scratch, ...options.env };
  }
  return new Promise<SandboxResult>((resolve, reject) => {
    const stdio: ('ignore' | 'pipe')[] = [options.stdin !== undefined ? 'pipe' : 'ignore', 'pipe', 'pipe', ...(options.resultFd ? (['pipe'] as const) : [])];
    const child = spawn(argv[0]!, argv.slice(1), { cwd, env, stdio, detached: !run.confined });
    if (options.stdin !== undefined) {
      // EPIPE when the code exits without reading it: nothing to report.
      child.stdin!.on('error', () => undefined);
      child.stdin!.end(options.stdin);
    }
    let timedOut = false;
    let killTimer: NodeJS.Timeout | undefined;
    const kill = (): void => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      try {
        // bwrap's death takes the pid namespace (and every process in it) along (--die-with-parent).
        if (run.confined) child.kill('SIGKILL');
        else process.kill(-child.pid!, 'SIGKILL');
      } catch {
        // Gone meanwhile.
      }
    };
    const timer = setTimeout(() => {
      timedOut = true;
      kill();
    }, options.timeoutMs);
    const onAbort = (): void => kill();
    options.signal?.addEventListener('abort', onAbort, { once: true });
    if (options.signal?.aborted) kill();
    const lines = lineCap(options.onLog);
    lines.attach('stdout', child.stdout!);
    lines.attach('stderr', child.stderr!);
    const result: Buffer[] = [];
    let resultBytes = 0;
    const resultPipe = options.resultFd ? (child.stdio[3] as NodeJS.ReadableStream) : undefined;
    resultPipe?.on('data', (chunk: Buffer) => {
      if (resultBytes + chunk.length <= SANDBOX_LIMITS.maxResultBytes) result.push(chunk);
      resultBytes += chunk.length;
    });
    child.once('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      if (killTimer) clearTimeout(killTimer);
      options.signal?.removeEventListener('abort', onAbort);
      lines.flush();
      const answer: SandboxResult = { code, signal, timedOut };
      if (options.resultFd) answer.result = resultBytes > SANDBOX_LIMITS.maxResultBytes ? '' : Buffer.concat(result).toString('utf8');
      resolve(answer);
    });
    // 'close' waits for the pipes: a grandchild that escaped the kill could hold them open.
    child.once('exit', () => {
      killTimer = setTimeout(() => {
        child.stdout?.destroy();
        child.stderr?.destroy();
        (resultPipe as { destroy?: () => void } | undefined)?.destroy?.();
      }, KILL_GRACE_MS);
    });
  });
}

/** Splits the streams into lines for onLog, cut at maxLineBytes and stopped after maxLogLines. */
function lineCap(onLog: SandboxRunOptions['onLog']): { attach: (stream: LogStream, from: NodeJS.ReadableStream) => void; flush: () => void } {
  let count = 0;
  const partial: Record<LogStream, string> = { stdout: '', stderr: '' };
  const emit = (stream: LogStream, line: string): void => {
    if (!onLog) return;
    count++;
    if (count > SANDBOX_LIMITS.maxLogLines) {
      if (count === SANDBOX_LIMITS.maxLogLines + 1) onLog('stderr', `[browserplane: output past ${SANDBOX_LIMITS.maxLogLines} lines dropped]`);
      return;
    }
    onLog(stream, line.length > SANDBOX_LIMITS.maxLineBytes ? `${line.slice(0, SANDBOX_LIMITS.maxLineBytes)} [cut]` : line);
  };
  return {
    attach(stream, from) {
      from.setEncoding('utf8');
      from.on('data', (chunk: string) => {
        const text = partial[stream] + chunk;
        const parts = text.split('\n');
        partial[stream] = parts.pop() ?? '';
        // A line with no end in sight is cut rather than held in memory.
        if (partial[stream].length > SANDBOX_LIMITS.maxLineBytes) {
          parts.push(partial[stream]);
          partial[stream] = '';
        }
        for (const line of parts) emit(stream, line.replace(/\r$/, ''));
      });
    },
    flush() {
      for (const stream of ['stdout', 'stderr'] as const) {
        if (partial[stream]) emit(stream, partial[stream]);
        partial[stream] = '';
      }
    },
  };
}
