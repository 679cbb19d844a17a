/**
 * Browserless for the peer benchmark: installed by scripts/browserless.sh (pinned versions,
 * cached outside the checkout), started on a free loopback port with a token, stopped with
 * every Chromium it launched. Nothing here runs unless the bench is asked for the peer.
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { REPO_ROOT } from '../test/support/service.js';

const START_TIMEOUT_MS = 60_000;
const STOP_TIMEOUT_MS = 15_000;

/** What scripts/browserless.sh prints: how to start the installed Browserless. */
interface Installed {
  node: string;
  cwd: string;
  entry: string;
  env: Record<string, string>;
}

export interface RunningBrowserless {
  /** ws://127.0.0.1:<port>?token=…: each connection gets a Chromium of its own. */
  wsUrl: string;
  version: string;
  /** Its process group: Browserless and every Chromium it launched. */
  pgid: number;
  stop(): Promise<void>;
}

/** Runs the install script (a no-op when the pinned versions are cached); throws with its reason. */
export function installBrowserless(): Installed {
  const script = path.join(REPO_ROOT, 'scripts/browserless.sh');
  // The script's progress and npm's output go straight to our stderr; stdout is its answer.
  const result = spawnSync(script, [], { stdio: ['ignore', 'pipe', 'inherit'], encoding: 'utf8' });
  if (result.error) throw new Error(`could not run ${script}: ${result.error.message}`);
  if (result.status !== 0) throw new Error(`installing Browserless failed: ${script} exited ${result.status ?? result.signal} (its messages are above)`);
  const last = result.stdout.trim().split('\n').at(-1) ?? '';
  try {
    return JSON.parse(last) as Installed;
  } catch {
    throw new Error(`${script} printed no start description: ${JSON.stringify(result.stdout.slice(-500))}`);
  }
}

/** Starts Browserless headless, at most `concurrent` browsers at once, its temp files in a dir of its own. */
export async function startBrowserless(installed: Installed, options: { concurrent: number }): Promise<RunningBrowserless> {
  const port = await freePort();
  const token = randomBytes(16).toString('hex');
  const tmp = await mkdtemp(path.join(os.tmpdir(), 'bp-peer-browserless-'));
  const child = spawn(installed.node, [installed.entry], {
    cwd: installed.cwd,
    env: {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      HOME: tmp,
      // Its data dirs, downloads and metrics file default to the temp dir: all go in ours.
      TMPDIR: tmp,
      HOST: '127.0.0.1',
      PORT: String(port),
      TOKEN: token,
      CONCURRENT: String(options.concurrent),
      TIMEOUT: '120000',
      // Warnings and errors only: its info lines would drown the bench's output.
      DEBUG: 'browserless*,-**:info,-**:debug,-**:trace,-**:verbose',
      ...installed.env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
    // Its own process group, so stop() reaches the Chromiums it launched too.
    detached: true,
  });
  let output = '';
  const keep = (chunk: Buffer) => (output = (output + chunk.toString()).slice(-4000));
  child.stdout.on('data', keep);
  child.stderr.on('data', keep);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  let alive = true;
  void exited.then(() => (alive = false));
  const pgid = child.pid!;
  liveGroups.add(pgid);

  const stop = async () => {
    signalGroup(pgid, 'SIGTERM');
    const timer = setTimeout(() => signalGroup(pgid, 'SIGKILL'), STOP_TIMEOUT_MS);
    await exited;
    clearTimeout(timer);
    // Chromiums it had not closed yet would outlive it in the group.
    signalGroup(pgid, 'SIGKILL');
    liveGroups.delete(pgid);
    await rm(tmp, { recursive: true, force: true });
  };

  const base = `http://127.0.0.1:${port}`;
  const t0 = performance.now();
  for (;;) {
    if (!alive) {
      await stop();
      throw new Error(`Browserless exited during start:\n${output}`);
    }
    const meta = await fetch(`${base}/meta?token=${token}`).catch(() => undefined);
    if (meta?.ok) {
      const { version } = (await meta.json()) as { version: string };
      return { wsUrl: `ws://127.0.0.1:${port}?token=${token}`, version, pgid, stop };
    }
    if (performance.now() - t0 > START_TIMEOUT_MS) {
      await stop();
      throw new Error(`Browserless did not answer ${base}/meta within ${START_TIMEOUT_MS} ms:\n${output}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** Process groups of ours still running, killed if the bench exits without its cleanup (an error, Ctrl-C). */
export const liveGroups = new Set<number>();

export function signalGroup(pgid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pgid, signal);
  } catch {
    // already gone
  }
}

process.once('exit', () => {
  for (const pgid of liveGroups) signalGroup(pgid, 'SIGKILL');
});

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}
