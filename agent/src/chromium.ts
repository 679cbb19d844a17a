import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import http from 'node:http';
import type { Logger } from 'pino';
import type { BrowserLaunchSpec } from '../../operator/src/ports/browser-runtime.js';
import type { SystemUser } from './system-user.js';
import type { XDisplay } from './display.js';
import { innerPid, killWrapped, wrappedExit } from './isolation.js';
import { killProcessGroup, waitForProcessGroupExit } from './process-group.js';
import type { WorkDir } from './work-dir.js';

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
  '--remote-debugging-port=0',
  '--remote-debugging-address=127.0.0.1',
];

export interface ChromiumExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface RunningChromium {
  /** Chromium's browser process, which leads its process group (a wrapper's child when wrapped). */
  pid: number;
  version: string;
  /** Chromium's own /json/version answer. */
  versionInfo: Record<string, unknown>;
  /** ws://127.0.0.1:<port>/devtools/browser/<id> */
  browserWsUrl: string;
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
  startTimeoutMs: number;
  /** A shutdown during start-up: stop waiting and kill what was started. */
  signal: AbortSignal;
  log: Logger;
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
    stdio: ['ignore', 'ignore', 'pipe'],
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
  log.debug({ chromium_pid: child.pid, args }, 'chromium spawned');
  let wrapperTail = '';
  if (options.wrap) child.stderr!.on('data', (chunk: Buffer | string) => (wrapperTail = (wrapperTail + chunk.toString()).slice(-500)));
  const exited = new Promise<ChromiumExit>((resolve) =>
    // Wrapped: on close, once the wrapper's last words (stderr) are read.
    options.wrap ? child.once('close', (code, signal) => resolve(wrappedExit(code, signal, wrapperTail))) : child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  const kill = async () => {
    if (child.pid) await (options.wrap ? killWrapped(child.pid) : killProcessGroup(child.pid));
  };
  const browserWsUrl = await devToolsUrl(child, exited, options.startTimeoutMs, options.signal).catch(async (error: unknown) => {
    await kill();
    throw error;
  });
  const pid = options.wrap ? await innerPid(child.pid!) : child.pid!;
  if (pid === undefined) {
    await kill();
    throw new ChromiumStartError('Chromium opened DevTools but its process is gone', '');
  }
  log.debug({ chromium_pid: pid }, 'chromium DevTools open');
  const versionInfo = await fetchVersionInfo(browserWsUrl);
  log.info({ chromium_pid: pid, executable, sandbox, user: user?.name, version: versionInfo.Browser }, 'chromium ready');
  return {
    pid,
    version: String(versionInfo.Browser),
    versionInfo,
    browserWsUrl,
    sandbox,
    ...(options.display ? { display: options.display } : {}),
    exited,
    close: async (graceMs) => {
      await closeChromium({ pid, browserWsUrl, exited, graceMs, log });
      if (options.wrap) await killProcessGroup(child.pid!);
    },
  };
}

/** Reads stderr until Chromium prints its DevTools endpoint; keeps a tail for the error message. */
function devToolsUrl(child: ChildProcess, exited: Promise<ChromiumExit>, timeoutMs: number, signal: AbortSignal): Promise<string> {
  return new Promise((resolve, reject) => {
    let tail = '';
    if (signal.aborted) reject(new ChromiumStartError('shutdown requested during start-up', tail));
    signal.addEventListener('abort', () => reject(new ChromiumStartError('shutdown requested during start-up', tail)), { once: true });
    const timer = setTimeout(() => reject(new ChromiumStartError(`Chromium did not open DevTools within ${timeoutMs} ms`, tail)), timeoutMs);
    child.once('error', (error) => reject(new ChromiumStartError(`Chromium could not be started: ${error.message}`, tail)));
    child.stderr!.setEncoding('utf8');
    child.stderr!.on('data', (chunk: string) => {
      tail = (tail + chunk).slice(-4000);
      const match = /DevTools listening on (ws:\/\/\S+)/.exec(tail);
      if (match) {
        clearTimeout(timer);
        resolve(match[1]!);
      }
    });
    void exited.then(({ code, signal }) => {
      clearTimeout(timer);
      reject(new ChromiumStartError(`Chromium exited during start-up (code ${code}, signal ${signal})`, tail));
    });
  });
}

/**
 * node:http, not fetch: the first fetch in a process loads undici, which costs about
 * 150 ms on the launch path here.
 */
function fetchVersionInfo(browserWsUrl: string): Promise<Record<string, unknown>> {
  const { host } = new URL(browserWsUrl);
  return new Promise((resolve, reject) => {
    const request = http.get(`http://${host}/json/version`, { timeout: 5000 }, (response) => {
      let body = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => (body += chunk));
      response.on('end', () => {
        if (response.statusCode !== 200) return reject(new Error(`Chromium /json/version answered ${response.statusCode}`));
        try {
          resolve(JSON.parse(body) as Record<string, unknown>);
        } catch (error) {
          reject(error instanceof Error ? error : new Error(String(error)));
        }
      });
    });
    request.on('timeout', () => request.destroy(new Error('Chromium /json/version timed out')));
    request.on('error', reject);
  });
}

/**
 * Browser.close lets Chromium remove its own temp files and flush the profile; a kill
 * does neither. Whatever is left after the grace period is killed as a group.
 */
async function closeChromium(options: { pid: number; browserWsUrl: string; exited: Promise<ChromiumExit>; graceMs: number; log: Logger }): Promise<void> {
  const { pid, browserWsUrl, exited, graceMs, log } = options;
  const started = Date.now();
  await sendBrowserClose(browserWsUrl, graceMs).catch((error: unknown) => {
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

async function sendBrowserClose(browserWsUrl: string, timeoutMs: number): Promise<void> {
  const { default: WebSocket } = await import('ws');
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(browserWsUrl, { perMessageDeflate: false });
    const timer = setTimeout(() => {
      socket.terminate();
      reject(new Error('Browser.close timed out'));
    }, timeoutMs);
    socket.once('open', () => socket.send(JSON.stringify({ id: 1, method: 'Browser.close' })));
    socket.once('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    // Chromium answers and then drops the connection as it exits; either means done.
    socket.once('close', () => {
      clearTimeout(timer);
      resolve();
    });
  });
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
