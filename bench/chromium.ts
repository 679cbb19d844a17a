/**
 * Bare Chromium for the benchmarks' baselines: the same binary, flags and unprivileged
 * user the agent uses, with no agent or service in between.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { chown, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { BASE_FLAGS } from '../agent/src/chromium.js';

const CHROMIUM = process.env.CHROME_PATH ?? '/usr/lib/chromium/chromium';

export interface BareChromium {
  child: ChildProcess;
  readyMs: number;
  stop(): Promise<void>;
}

/** Chromium as the agent starts it, measured from spawn until /json/version answers. */
export async function launchBareChromium(user: { uid: number; gid: number } | undefined): Promise<BareChromium> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'bp-bare-'));
  if (user) await chown(dir, user.uid, user.gid);
  const t0 = performance.now();
  // The session's defaults (1920x1080), so the comparison is the agent's cost alone.
  const child = spawn(CHROMIUM, [...BASE_FLAGS, `--user-data-dir=${dir}`, '--headless', '--window-size=1920,1080', 'about:blank'], {
    ...(user ? { uid: user.uid, gid: user.gid } : {}),
    env: { HOME: dir, TMPDIR: dir, PATH: process.env.PATH ?? '/usr/bin:/bin' },
    stdio: ['ignore', 'ignore', 'pipe'],
    detached: true,
  });
  const wsUrl = await new Promise<string>((resolve, reject) => {
    let text = '';
    child.stderr.on('data', (chunk: Buffer) => {
      text += chunk.toString();
      const match = /DevTools listening on (ws:\/\/\S+)/.exec(text);
      if (match) resolve(match[1]!);
    });
    child.once('exit', (code) => reject(new Error(`chromium exited with ${code}: ${text.slice(-500)}`)));
  });
  const port = new URL(wsUrl).port;
  for (;;) {
    const ok = await fetch(`http://127.0.0.1:${port}/json/version`).then((r) => r.ok, () => false);
    if (ok) break;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  const readyMs = performance.now() - t0;
  return {
    child,
    readyMs,
    async stop() {
      // Browser.close over CDP leaves no temp dirs; a kill would.
      const { WebSocket } = await import('ws');
      await new Promise<void>((resolve) => {
        const ws = new WebSocket(wsUrl);
        ws.once('open', () => ws.send(JSON.stringify({ id: 1, method: 'Browser.close' })));
        ws.once('error', () => resolve());
        child.once('exit', () => resolve());
      });
      await rm(dir, { recursive: true, force: true });
    },
  };
}
