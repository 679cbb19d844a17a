import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import type { Readable, Writable } from 'node:stream';
import type { Logger } from 'pino';
import type { BrowserLaunchSpec } from '../../contract/browser-runtime.js';
import { CdpMux } from './cdp/mux.js';
import type { CdpPolicy } from './cdp/policy.js';
import { CdpPipe } from './cdp/pipe.js';
import type { SystemUser } from '../../lib/system-user.js';
import type { XDisplay } from './display.js';
import { innerPid, killWrapped, wrappedExit } from './isolation.js';
import { killProcessGroup, waitForProcessGroupExit } from '../../lib/process-group.js';
import type { WorkDir } from './work-dir.js';
import { superviseProcess } from './logs/supervisor.js';

/**
 * Debian's /usr/bin/chromium is a shell wrapper that adds extension and GPU flags and
 * prints a harmless error here; the binary behind it starts 10-15 ms sooner and takes
 * only our flags (docs: ../shared/notes/machine.md).
 */
const CHROMIUM_CANDIDATES = ['/usr/lib/chromium/chromium', '/usr/bin/chromium', '/usr/bin/chromium-browser', '/usr/bin/google-chrome'];

/** Always on: a browser for automation phones home for nothing and speaks no QUIC (proxies see TCP). */
export const BASE_FLAGS = [
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
  '--no-default-browser-check',
  '--disable-quic',
  '--password-store=basic',
  // CDP on fds 3 and 4 (see cdp/pipe.ts), never a TCP port any local process or page could reach.
  '--remote-debugging-pipe',
];

export interface ChromiumExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface RunningChromium {
  /** Chromium's browser process, which leads its process group (a wrapper's child when wrapped). */
  pid: number;
  version: string;
  /** What Chromium's /json/version would answer, made from Browser.getVersion (no webSocketDebuggerUrl). */
  versionInfo: Record<string, unknown>;
  /** CDP over the pipe: each consumer opens its own virtual connection (cdp/mux.ts). */
  cdp: CdpMux;
  sandbox: boolean;
  /** The virtual display of a headful browser; absent when headless. */
  display?: XDisplay;
  exited: Promise<ChromiumExit>;
  /** Browser.close, then SIGKILL of the group after `graceMs`; resolves when no process is left. */
  close(graceMs: number): Promise<void>;
}

export function findChromium(override: string | undefined): string {
  if (override) return override;
  const found = CHROMIUM_CANDIDATES.find((candidate) => existsSync(candidate));
  if (!found) throw new Error(`Chromium not found (tried ${CHROMIUM_CANDIDATES.join(', ')}); set CHROME_PATH`);
  return found;
}

/** `extraFlags`: flags of the modules a spec turns on (proxy forwarder, stealth). */
export function chromiumArgs(spec: BrowserLaunchSpec, dirs: WorkDir, options: { sandbox: boolean; extraFlags?: string[] }): string[] {
  const args = [...BASE_FLAGS, `--user-data-dir=${dirs.userData}`, ...(options.extraFlags ?? [])];
  // Headful runs on the browser's own Xvfb, whose screen is the viewport size.
  args.push(...(spec.headless ? ['--headless'] : ['--window-position=0,0', ...(spec.kioskMode ? ['--kiosk'] : [])]));
  args.push(`--window-size=${spec.viewport.width},${spec.viewport.height}`);
  if (!options.sandbox) args.push('--no-sandbox');
  // The start URL is Chromium's first tab: a failed navigation shows an error page and
  // never fails the launch. '--' ends the switches, so a URL can never pass as one
  // (--renderer-cmd-prefix would run a command).
  args.push('--', startUrlOf(spec));
  return args;
}

/** Web pages only; anything else (file:, chrome:, javascript:, garbage) opens about:blank. */
export function startUrlOf(spec: BrowserLaunchSpec): string {
  if (!spec.startUrl) return 'about:blank';
  try {
    const url = new URL(spec.startUrl);
    return ['http:', 'https:'].includes(url.protocol) ? url.href : 'about:blank';
  } catch {
    return 'about:blank';
  }
}

interface LaunchOptions {
  executable: string;
  spec: BrowserLaunchSpec;
  dirs: WorkDir;
  user: SystemUser | undefined;
  sandbox: boolean;
  display: XDisplay | undefined;
  extraFlags?: string[];
  /**
   * Wraps the command line (the session's namespaces and chrome_policy, see isolation.ts);
   * the wrapper is spawned as root, drops to `user` itself and execs Chromium as its only
   * child, which leads its own process group.
   */
  wrap?: (executable: string, args: string[]) => { command: string; args: string[] };
  /** What CDP clients may ask of the browser (cdp/policy.ts). */
  cdpPolicy?: CdpPolicy;
  startTimeoutMs: number;
  /** A shutdown during start-up: stop waiting and kill what was started. */
  signal: AbortSignal;
  log: Logger;
  /** Called right after the spawn (for the start's timings). */
  onSpawn?: () => void;
}

export class ChromiumStartError extends Error {
  constructor(
    message: string,
    readonly stderrTail: string,
  ) {
    super(message);
  }
}

export async function launchChromium(options: LaunchOptions): Promise<RunningChromium> {
  const { executable, spec, dirs, user, sandbox, log } = options;
  const args = chromiumArgs(spec, dirs, { sandbox, extraFlags: options.extraFlags });
  const command = options.wrap?.(executable, args) ?? { command: executable, args };
  const child = spawn(command.command, command.args, {
    // Its own process group, so the agent can kill the whole tree without killing itself.
    detached: true,
    // fds 3 and 4 are the DevTools pipe; a wrapper (policy.ts) passes them on through exec.
    stdio: ['ignore', 'ignore', 'pipe', 'pipe', 'pipe'],
    ...(user && !options.wrap ? { uid: user.uid, gid: user.gid } : {}),
    env: {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      HOME: dirs.home,
      TMPDIR: dirs.tmp,
      XDG_CONFIG_HOME: `${dirs.home}/.config`,
      XDG_CACHE_HOME: `${dirs.home}/.cache`,
      LANG: process.env.LANG ?? 'C.UTF-8',
      ...options.display?.env,
    },
  });
  options.onSpawn?.();
  log.debug({ chromium_pid: child.pid, args }, 'chromium spawned');
  superviseProcess('chromium', child);
  const exited = new Promise<ChromiumExit>((resolve) =>
    // Wrapped: on close, once the wrapper's last words (stderr) are read.
    options.wrap ? child.once('close', (code, signal) => resolve(wrappedExit(code, signal))) : child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  const kill = async () => {
    if (child.pid) await (options.wrap ? killWrapped(child.pid) : killProcessGroup(child.pid));
  };
  const pipe = new CdpPipe(child.stdio[3] as Writable, child.stdio[4] as Readable);
  const cdp = new CdpMux(pipe, log, options.cdpPolicy);
  const answering = answered(child, cdp, exited, options.startTimeoutMs, options.signal);
  // The first client's browser session is asked for now, behind Browser.getVersion: Chromium
  // answers both as DevTools comes up, so a client that connected while Chromium started
  // sends its first command at once rather than after another round trip (cdp/mux.ts).
  cdp.prepareConnection();
  const versionInfo = await answering.catch(async (error: unknown) => {
    pipe.close();
    await kill();
    throw error;
  });
  const pid = options.wrap ? await innerPid(child.pid!) : child.pid!;
  if (pid === undefined) {
    pipe.close();
    await kill();
    throw new ChromiumStartError('Chromium answered on the DevTools pipe but its process is gone', '');
  }
  log.info({ chromium_pid: pid, executable, sandbox, user: user?.name, version: versionInfo.Browser }, 'chromium ready');
  return {
    pid,
    version: String(versionInfo.Browser),
    versionInfo,
    cdp,
    sandbox,
    ...(options.display ? { display: options.display } : {}),
    exited,
    close: async (graceMs) => {
      await closeChromium({ pid, cdp, exited, graceMs, log });
      if (options.wrap) await killProcessGroup(child.pid!);
    },
  };
}

/**
 * Chromium is ready when it answers Browser.getVersion on the pipe (it reads the pipe
 * once DevTools is up; what was written before waits there). stderr is kept as a tail
 * for the error message. The answer becomes the /json/version Chromium would give.
 */
function answered(child: ChildProcess, cdp: CdpMux, exited: Promise<ChromiumExit>, timeoutMs: number, signal: AbortSignal): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    let tail = '';
    if (signal.aborted) reject(new ChromiumStartError('shutdown requested during start-up', tail));
    signal.addEventListener('abort', () => reject(new ChromiumStartError('shutdown requested during start-up', tail)), { once: true });
    const timer = setTimeout(() => reject(new ChromiumStartError(`Chromium did not answer on the DevTools pipe within ${timeoutMs} ms`, tail)), timeoutMs);
    child.once('error', (error) => reject(new ChromiumStartError(`Chromium could not be started: ${error.message}`, tail)));
    child.stderr!.setEncoding('utf8');
    child.stderr!.on('data', (chunk: string) => (tail = (tail + chunk).slice(-4000)));
    cdp.command<BrowserVersion>('Browser.getVersion').then(
      (version) => {
        clearTimeout(timer);
        resolve(versionInfoOf(version));
      },
      // The pipe closes as Chromium exits: the exit below says more (and stderr's tail has come by then).
      () => undefined,
    );
    void exited.then(({ code, signal }) => {
      clearTimeout(timer);
      reject(new ChromiumStartError(`Chromium exited during start-up (code ${code}, signal ${signal})`, tail));
    });
  });
}

interface BrowserVersion {
  protocolVersion: string;
  product: string;
  revision: string;
  userAgent: string;
  jsVersion: string;
}

/** Chromium's /json/version fields, as its DevTools HTTP handler writes them from the same values. */
export function versionInfoOf(version: BrowserVersion): Record<string, unknown> {
  return {
    Browser: version.product,
    'Protocol-Version': version.protocolVersion,
    'User-Agent': version.userAgent,
    'V8-Version': version.jsVersion,
    'WebKit-Version': `537.36 (${version.revision})`,
    // Chromium 156 on Linux adds it (how its file paths are written).
    'File-Path-Style': 'posix',
  };
}

/**
 * Browser.close lets Chromium remove its own temp files and flush the profile; a kill
 * does neither. Whatever is left after the grace period is killed as a group.
 */
async function closeChromium(options: { pid: number; cdp: CdpMux; exited: Promise<ChromiumExit>; graceMs: number; log: Logger }): Promise<void> {
  const { pid, cdp, exited, graceMs, log } = options;
  const started = Date.now();
  await sendBrowserClose(cdp, graceMs).catch((error: unknown) => {
    log.warn({ err: error }, 'Browser.close failed; killing chromium');
  });
  const remaining = Math.max(0, graceMs - (Date.now() - started));
  const mainExited = await Promise.race([exited.then(() => true), sleep(remaining).then(() => false)]);
  const groupGone = mainExited && (await waitForProcessGroupExit(pid, Math.max(0, graceMs - (Date.now() - started))));
  if (!groupGone) {
    log.warn({ chromium_pid: pid, grace_ms: graceMs }, 'chromium still running after the grace period: SIGKILL of its process group');
  }
  await killProcessGroup(pid);
  log.info({ chromium_pid: pid, ms: Date.now() - started, graceful: groupGone }, 'chromium closed');
}

/** Chromium answers and then closes the pipe as it exits; either means done. */
async function sendBrowserClose(cdp: CdpMux, timeoutMs: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error('Browser.close timed out')), timeoutMs)));
  try {
    await Promise.race([cdp.command('Browser.close').catch((error: unknown) => {
      if (!/closed the CDP pipe/.test(error instanceof Error ? error.message : '')) throw error;
    }), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
