import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { packageRoot } from '../api/src/paths.js';

export interface BuiltService {
  child: ChildProcess;
  key: string;
  dataDir: string;
  stop(): Promise<void>;
}

/**
 * The built service as a user starts it: embedded Postgres in a fresh data dir, a configured admin key.
 * `env` adds to (or overrides) the environment, e.g. a setting one benchmark needs.
 */
export async function startBuiltService(options: { env?: Record<string, string> } = {}): Promise<BuiltService> {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'browserplane-bench-'));
  const key = 'bench_' + randomBytes(24).toString('hex');
  const child = spawn(process.execPath, [path.join(packageRoot(), 'dist/api/src/main.js')], {
    env: { ...process.env, PORT: '0', BROWSERPLANE_DATA_DIR: dataDir, BROWSERPLANE_API_KEY: key, LOG_LEVEL: 'info', ...options.env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  return {
    child,
    key,
    dataDir,
    async stop() {
      if (child.exitCode === null) {
        child.kill('SIGTERM');
        await new Promise((resolve) => child.once('exit', resolve));
      }
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}

/** Resolves with the URL from the service's 'browserplane listening' log line. */
export function listeningUrl(child: ChildProcess): Promise<string> {
  return new Promise((resolve, reject) => {
    const lines = createInterface({ input: child.stdout! });
    const timer = setTimeout(() => reject(new Error('service did not start within 60 s')), 60_000);
    child.once('exit', (code) => reject(new Error(`service exited with ${code}`)));
    lines.on('line', (line) => {
      try {
        const entry = JSON.parse(line) as { msg?: string; url?: string };
        if (entry.msg === 'browserplane listening' && entry.url) {
          clearTimeout(timer);
          resolve(entry.url);
        }
      } catch {
        // not a log line
      }
    });
  });
}
