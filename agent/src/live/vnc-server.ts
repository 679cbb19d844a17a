import { spawn } from 'node:child_process';
import { rm, stat } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import type { Logger } from 'pino';
import { superviseProcess } from '../logs/supervisor.js';
import type { XDisplay } from '../display.js';
import { killProcessGroup, signalProcessGroup, waitForProcessGroupExit } from '../../../lib/process-group.js';

/**
 * x11vnc on a headful browser's own Xvfb, started on the first live view client and
 * shared by every later one. It listens on a Unix socket in the browser's home
 * directory (mode 0700, owned by the browser's user) and on no TCP port, so only the
 * agent (root) and that user can reach it, and it needs no VNC password: the service's
 * signed token is the access check. It runs as the display's user, the same as Xvfb.
 */

export interface VncServer {
  socketPath: string;
  /** A new RFB connection to x11vnc, one per live view client. */
  connect(): Promise<net.Socket>;
}

interface RunningVncServer extends VncServer {
  stop(): Promise<void>;
}

const START_TIMEOUT_MS = 10_000;
const STOP_GRACE_MS = 2_000;

/**
 * Flags, and why:
 * - -shared -forever: several viewers at once, and x11vnc stays after the last leaves.
 * - -xrandr resize: follow the screen when PATCH viewport resizes it (noVNC handles
 *   the new desktop size); without it x11vnc keeps reading the old geometry.
 * - -ncache 0: client-side caching draws its cache below the screen, which noVNC shows.
 * - -wait 10 -defer 10: poll and send every 10 ms instead of 20 ms; a browser page is
 *   mostly static, and XDAMAGE keeps the polling cheap, so this halves the latency of
 *   a click's visible effect for little CPU.
 * - -nowf: no wireframe for window moves; there is no window manager to move windows.
 * - -norc -nopw -quiet: no ~/.x11vncrc, no password banner, no chatter on stderr.
 */
function x11vncArgs(display: XDisplay, socketPath: string, viewOnly: boolean): string[] {
  return [
    // Read-only live views: x11vnc ignores their key, pointer and clipboard messages.
    ...(viewOnly ? ['-viewonly'] : []),
    '-display', display.name,
    '-auth', display.xauthority,
    '-unixsock', socketPath,
    '-rfbport', '0',
    '-shared', '-forever',
    '-xrandr', 'resize',
    '-ncache', '0',
    '-wait', '10', '-defer', '10',
    '-nowf',
    '-norc', '-nopw', '-quiet',
  ];
}

const servers = new Map<string, Promise<RunningVncServer>>();

/**
 * The running x11vnc of `display`, started when there is none yet (or the last one died).
 * Read-only viewers get their own, started with -viewonly: at most two per browser.
 */
export function vncServerFor(display: XDisplay, log: Logger, viewOnly = false): Promise<VncServer> {
  const key = `${display.name}${viewOnly ? ':view' : ''}`;
  let server = servers.get(key);
  if (!server) {
    server = startVncServer(display, log, viewOnly, () => servers.delete(key));
    servers.set(key, server);
    server.catch(() => servers.delete(key));
  }
  return server;
}

/** For agent shutdown: every x11vnc is stopped and its socket removed; live view clients see their connection close. */
export async function stopVncServers(): Promise<void> {
  const running = [...servers.values()];
  servers.clear();
  await Promise.all(running.map(async (server) => (await server.catch(() => undefined))?.stop()));
}

async function startVncServer(display: XDisplay, log: Logger, viewOnly: boolean, onExit: () => void): Promise<RunningVncServer> {
  const started = Date.now();
  // The Xauthority file belongs to the display's user (display.ts chowns it), in <work dir>/x11.
  const owner = await stat(display.xauthority);
  const home = path.dirname(display.xauthority);
  const socketPath = path.join(home, viewOnly ? 'vnc-view.sock' : 'vnc.sock');
  await rm(socketPath, { force: true });
  const child = spawn('x11vnc', x11vncArgs(display, socketPath, viewOnly), {
    detached: true,
    stdio: ['ignore', 'ignore', 'pipe'],
    ...(process.getuid?.() === 0 ? { uid: owner.uid, gid: owner.gid } : {}),
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: home, ...display.env },
  });
  superviseProcess('x11vnc', child);
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr = (stderr + chunk).slice(-2000)));
  let running = true;
  const exited = new Promise<void>((resolve) =>
    child.once('exit', (code, signal) => {
      running = false;
      onExit();
      log.info({ x11vnc_pid: child.pid, code, signal, stderr_tail: stderr.trim() || undefined }, 'x11vnc exited');
      resolve();
    }),
  );
  const spawnError = new Promise<never>((_, reject) =>
    child.once('error', (error) => reject(new Error(`x11vnc could not be started (is the x11vnc package installed?): ${error.message}`))),
  );
  const pid = child.pid;
  const stop = async () => {
    if (pid === undefined) return;
    signalProcessGroup(pid, 'SIGTERM');
    if (!(await waitForProcessGroupExit(pid, STOP_GRACE_MS))) log.warn({ x11vnc_pid: pid }, 'x11vnc still running after SIGTERM: SIGKILL');
    await killProcessGroup(pid);
    await exited;
    await rm(socketPath, { force: true });
  };
  const connect = () => connectUnix(socketPath);
  try {
    // The first connection doubles as the readiness check: x11vnc binds the socket once it has the display.
    const probe = await Promise.race([
      retryConnect(socketPath, () => running, () => stderr, START_TIMEOUT_MS),
      spawnError,
      exited.then(() => Promise.reject(new Error(`x11vnc exited during start-up: ${stderr.trim() || 'no output'}`))),
    ]);
    probe.destroy();
  } catch (error) {
    await stop();
    throw error;
  }
  log.info({ x11vnc_pid: pid, display: display.name, view_only: viewOnly, ms: Date.now() - started }, 'x11vnc ready');
  return { socketPath, connect, stop };
}

function connectUnix(socketPath: string): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(socketPath);
    socket.once('connect', () => {
      socket.off('error', reject);
      resolve(socket);
    });
    socket.once('error', reject);
  });
}

async function retryConnect(socketPath: string, alive: () => boolean, stderr: () => string, timeoutMs: number): Promise<net.Socket> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await connectUnix(socketPath);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if ((code !== 'ENOENT' && code !== 'ECONNREFUSED') || !alive()) throw error;
      if (Date.now() >= deadline) throw new Error(`x11vnc did not listen within ${timeoutMs} ms: ${stderr().trim() || 'no output'}`, { cause: error });
      await new Promise((resolve) => setTimeout(resolve, 30));
    }
  }
}
