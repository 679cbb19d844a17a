/**
 * Bare Chromium for the benchmarks' baselines: the same binary, flags and unprivileged
 * user the agent uses, with no agent or service in between. CDP is on the DevTools pipe
 * (fds 3 and 4), as the agent speaks it; ready is the first answer to Browser.getVersion,
 * the agent's own readiness test.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { chown, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Readable, Writable } from 'node:stream';
import { BASE_FLAGS } from '../agent/src/chromium.js';

export const CHROMIUM = process.env.CHROME_PATH ?? '/usr/lib/chromium/chromium';

export interface BareChromium {
  child: ChildProcess;
  readyMs: number;
  /** Sends one CDP command over the pipe (to a flat session when `sessionId` is given) and resolves with its result. */
  command(method: string, params?: Record<string, unknown>, sessionId?: string): Promise<unknown>;
  stop(): Promise<void>;
}

/** Chromium as the agent starts it, measured from spawn until Browser.getVersion answers. */
export async function launchBareChromium(user: { uid: number; gid: number } | undefined, options: { headless?: boolean } = {}): Promise<BareChromium> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'bp-bare-'));
  if (user) await chown(dir, user.uid, user.gid);
  const t0 = performance.now();
  // The session's defaults (1920x1080), so the comparison is the agent's cost alone.
  const child = spawn(CHROMIUM, [...BASE_FLAGS, `--user-data-dir=${dir}`, ...(options.headless === false ? [] : ['--headless']), '--window-size=1920,1080', 'about:blank'], {
    ...(user ? { uid: user.uid, gid: user.gid } : {}),
    env: { HOME: dir, TMPDIR: dir, PATH: process.env.PATH ?? '/usr/bin:/bin', ...(process.env.DISPLAY ? { DISPLAY: process.env.DISPLAY } : {}) },
    stdio: ['ignore', 'ignore', 'pipe', 'pipe', 'pipe'],
    detached: true,
  });
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-2000)));
  const input = child.stdio[3] as Writable;
  const output = child.stdio[4] as Readable;
  const pending = new Map<number, { resolve(value: unknown): void; reject(error: Error): void }>();
  let buffered = '';
  output.on('data', (chunk: Buffer) => {
    buffered += chunk.toString();
    for (let end = buffered.indexOf('\0'); end >= 0; end = buffered.indexOf('\0')) {
      const message = JSON.parse(buffered.slice(0, end)) as { id?: number; result?: unknown; error?: { message: string } };
      buffered = buffered.slice(end + 1);
      const waiter = message.id === undefined ? undefined : pending.get(message.id);
      if (!waiter) continue;
      pending.delete(message.id!);
      if (message.error) waiter.reject(new Error(message.error.message));
      else waiter.resolve(message.result);
    }
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  void exited.then(() => {
    for (const waiter of pending.values()) waiter.reject(new Error(`chromium exited: ${stderr.slice(-500)}`));
    pending.clear();
  });
  let nextId = 1;
  const command = (method: string, params: Record<string, unknown> = {}, sessionId?: string) =>
    new Promise<unknown>((resolve, reject) => {
      const id = nextId++;
      pending.set(id, { resolve, reject });
      input.write(JSON.stringify({ id, method, params, ...(sessionId ? { sessionId } : {}) }) + '\0');
    });
  await command('Browser.getVersion');
  const readyMs = performance.now() - t0;
  return {
    child,
    readyMs,
    command,
    async stop() {
      // Browser.close over CDP leaves no temp dirs; a kill would.
      await Promise.race([command('Browser.close').catch(() => undefined), exited]);
      await exited;
      await rm(dir, { recursive: true, force: true });
    },
  };
}
