/**
 * `make run` stopped by signalling its whole process group (`kill -- -PGID`, what a
 * supervisor or a terminal does): GNU make forwards the SIGTERM it gets to the service,
 * so the service sees the signal twice per kill. The built service is run by a real
 * make, as `make run` runs it (a one-rule Makefile: the repository's `run` would first
 * install dependencies and build).
 */
import { spawn } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { createInterface } from 'node:readline';
import Kernel from '@onkernel/sdk';
import { afterEach, describe, expect, it } from 'vitest';
import { eventually } from '../support/eventually.js';
import { cleanupServices, createDataDir, LISTENING_MSG, MAIN_JS, postgresPids } from '../support/service.js';
import { processesMentioning } from './support/processes.js';

afterEach(cleanupServices);

interface Line {
  msg?: string;
  url?: string;
}

/** Starts `make run`'s equivalent as the leader of a new process group; its output as parsed log lines. */
async function makeRun(dataDir: string) {
  const makefile = path.join(dataDir, 'Makefile');
  await writeFile(makefile, `run:\n\t${process.execPath} ${MAIN_JS}\n`);
  const env = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: dataDir, TZ: 'UTC', HOST: '127.0.0.1', PORT: '0', LOG_LEVEL: 'info', BROWSERPLANE_SPARE_BROWSERS: '0', BROWSERPLANE_DATA_DIR: dataDir, BROWSERPLANE_LOG_FORMAT: 'json' };
  const make = spawn('make', ['--no-print-directory', '-f', makefile, 'run'], { cwd: dataDir, env, detached: true, stdio: ['ignore', 'pipe', 'inherit'] });
  const lines: Line[] = [];
  createInterface({ input: make.stdout }).on('line', (text) => {
    if (text.startsWith('{')) lines.push(JSON.parse(text) as Line);
  });
  // Closes when the last writer (make, then the service it started) is gone.
  const outputClosed = new Promise<void>((resolve) => make.stdout.once('close', () => resolve()));
  const logged = (msg: string) => eventually(() => lines.find((line) => line.msg === msg), { timeoutMs: 60_000, intervalMs: 50, what: msg });
  const listening = await logged(LISTENING_MSG);
  return { pgid: make.pid!, lines, outputClosed, logged, url: listening.url! };
}

describe('make run stopped through its process group', () => {
  it('two group SIGTERMs (four with make\'s copies) still stop every browser and Postgres before the service exits', async () => {
    const dataDir = await createDataDir();
    const run = await makeRun(dataDir);
    const apiKey = (await readFile(path.join(dataDir, 'admin-api-key'), 'utf8')).trim();
    const kernel = new Kernel({ apiKey, baseURL: run.url, maxRetries: 0 });
    const session = await kernel.browsers.create({ headless: true });
    const record = JSON.parse(await readFile(path.join(dataDir, 'browsers', `${session.session_id}.json`), 'utf8')) as { agentPid: number; workDir: string };
    expect(postgresPids(dataDir)).not.toEqual([]);
    expect(await processesMentioning(record.workDir)).not.toEqual([]);

    process.kill(-run.pgid, 'SIGTERM');
    await run.logged('shutting down: draining requests');
    process.kill(-run.pgid, 'SIGTERM');
    await run.outputClosed;

    expect(run.lines.find((line) => line.msg?.startsWith('shutting down: 1 browser'))).toBeDefined();
    expect(run.lines.map((line) => line.msg)).toContain('stopped');
    expect(postgresPids(dataDir)).toEqual([]);
    expect(await processesMentioning(record.workDir)).toEqual([]);
  });
});
