import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmod, chown, mkdir, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Logger } from 'pino';
import { superviseProcess } from './logs/supervisor.js';
import type { SystemUser } from '../../lib/system-user.js';
import { isProcessAlive, killProcessGroup, signalProcessGroup, waitForProcessGroupExit } from '../../lib/process-group.js';

/**
 * The virtual display of a headful browser: one Xvfb per browser, so live view and the
 * computer endpoints act on that browser alone. Xvfb picks a free display number itself
 * (-displayfd writes it once the server accepts connections, which is also our readiness
 * signal), runs as the browser's unprivileged user and takes only clients holding the
 * per-browser MIT cookie (-auth), so another local user cannot type into the browser.
 */

export interface XDisplay {
  /** ":N" */
  name: string;
  number: number;
  width: number;
  height: number;
  /** Xauthority file holding the cookie; every X client of this browser needs it. */
  xauthority: string;
  /** Environment for X clients (Chromium, xdotool, xclip, unclutter). */
  env: Record<string, string>;
  /** Xvfb's pid (and process group). */
  pid: number;
  stop(): Promise<void>;
}

const X11_SOCKET_DIR = '/tmp/.X11-unix';
const STOP_GRACE_MS = 2000;

export async function startDisplay(options: {
  width: number;
  height: number;
  /**
   * Where the MIT cookie (and live view's VNC socket) go: a directory of the session's
   * work dir outside its files (<work dir>/x11, not HOME, which the fs API serves as "/",
   * so a client could read the cookie there). The browser's mount namespace binds the
   * whole work dir, so Chromium still reaches it. Created if missing.
   */
  dir: string;
  user: SystemUser | undefined;
  timeoutMs: number;
  log: Logger;
}): Promise<XDisplay> {
  const { width, height, dir, user, log } = options;
  await ensureSocketDir();
  // Only the display's user may enter: the cookie and live view's VNC socket live here.
  await mkdir(dir, { recursive: true, mode: 0o700 });
  if (user) await chown(dir, user.uid, user.gid);
  const xauthority = path.join(dir, 'Xauthority');
  await writeFile(xauthority, xauthorityEntry(randomBytes(16)), { mode: 0o600 });
  if (user) await chown(xauthority, user.uid, user.gid);
  const started = Date.now();
  const child = spawn('Xvfb', ['-displayfd', '3', '-screen', '0', `${width}x${height}x24`, '-nolisten', 'tcp', '-auth', xauthority], {
    detached: true,
    stdio: ['ignore', 'ignore', 'pipe', 'pipe'],
    ...(user ? { uid: user.uid, gid: user.gid } : {}),
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
  });
  superviseProcess('xvfb', child);
  let stderr = '';
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (stderr = (stderr + chunk).slice(-2000)));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const number = await new Promise<number>((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`Xvfb did not open a display within ${options.timeoutMs} ms: ${stderr.trim()}`)), options.timeoutMs);
    child.once('error', (error) => reject(new Error(`Xvfb could not be started (is the xvfb package installed?): ${error.message}`)));
    (child.stdio[3] as NodeJS.ReadableStream).setEncoding('utf8');
    (child.stdio[3] as NodeJS.ReadableStream).on('data', (chunk: string) => {
      out += chunk;
      if (out.includes('\n')) {
        clearTimeout(timer);
        resolve(Number(out.trim()));
      }
    });
    void exited.then(() => reject(new Error(`Xvfb exited during start-up: ${stderr.trim()}`)));
  }).catch(async (error: unknown) => {
    if (child.pid) await killProcessGroup(child.pid);
    throw error;
  });
  const pid = child.pid!;
  const name = `:${number}`;
  log.info({ display: name, xvfb_pid: pid, ms: Date.now() - started, width, height }, 'display ready');
  return {
    name,
    number,
    width,
    height,
    xauthority,
    pid,
    env: { DISPLAY: name, XAUTHORITY: xauthority },
    stop: () => stopDisplay({ pid, number, exited, log }),
  };
}

/** SIGTERM lets Xvfb remove its socket and lock file; after the grace period both are removed for it. */
async function stopDisplay(options: { pid: number; number: number; exited: Promise<void>; log: Logger }): Promise<void> {
  const { pid, number, log } = options;
  signalProcessGroup(pid, 'SIGTERM');
  const gone = await Promise.race([options.exited.then(() => true), sleep(STOP_GRACE_MS).then(() => false)]);
  if (!gone || !(await waitForProcessGroupExit(pid, STOP_GRACE_MS))) log.warn({ xvfb_pid: pid }, 'Xvfb still running after SIGTERM: SIGKILL');
  await killProcessGroup(pid);
  if (!isProcessAlive(pid)) {
    await rm(path.join(X11_SOCKET_DIR, `X${number}`), { force: true });
    await rm(`/tmp/.X${number}-lock`, { force: true });
  }
  log.info({ display: `:${number}` }, 'display stopped');
}

/**
 * Xvfb as an unprivileged user cannot create the shared socket directory with the right
 * owner; as root we create it the way an X server would (root, sticky, world-writable).
 */
async function ensureSocketDir(): Promise<void> {
  const existing = await stat(X11_SOCKET_DIR).catch(() => undefined);
  if (existing || process.getuid?.() !== 0) return;
  await mkdir(X11_SOCKET_DIR, { mode: 0o1777 }).catch((error: NodeJS.ErrnoException) => {
    if (error.code !== 'EEXIST') throw error;
  });
  await chmod(X11_SOCKET_DIR, 0o1777);
}

/**
 * One Xauthority entry: family FamilyWild, empty address and an empty display number,
 * which Xlib matches for any display, so the file can be written before Xvfb has
 * chosen its number. Xvfb loads every cookie of the file regardless of the number.
 */
export function xauthorityEntry(cookie: Buffer): Buffer {
  const field = (value: Buffer) => {
    const length = Buffer.alloc(2);
    length.writeUInt16BE(value.length);
    return Buffer.concat([length, value]);
  };
  const family = Buffer.from([0xff, 0xff]);
  return Buffer.concat([family, field(Buffer.alloc(0)), field(Buffer.alloc(0)), field(Buffer.from('MIT-MAGIC-COOKIE-1')), field(cookie)]);
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
