import { spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { readdir, readFile as readHostFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../api/src/clock.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { newProject } from './browsers.fixtures.js';
import { fsPut, newFsSession, rawRequest, type FsSession } from './browser-fs.fixtures.js';

/**
 * One request must not stall or swell the agent (issue 16, items 5 and 6), with the
 * agent's default limits: a part sent before its dest_path streams to disk instead of
 * memory, and walks of deep or large trees are bounded and leave the agent answering
 * /health. Figures are printed; the assertions are bounds, not timings.
 */

const MIB = 1024 * 1024;

let app: TestApp;
let fs: FsSession;
let agentUrl: string;
let agentPid: number;

beforeAll(async () => {
  app = await startTestApp({ clock: systemClock });
  const { http } = await newFsSessionProject();
  fs = await newFsSession(app, http);
  const { rows } = await app.database.db.query<{ agent_url: string }>('SELECT agent_url FROM browser_sessions WHERE id = $1', [fs.id]);
  agentUrl = rows[0]!.agent_url;
  const health = (await (await fetch(`${agentUrl}/health?wait_ms=5000`, { headers: { authorization: `Bearer ${app.deps.agentTokens(fs.id)}` } })).json()) as { browser: { pid: number } };
  agentPid = await agentOf(health.browser.pid);
});
afterAll(async () => {
  await app?.close();
});

const newFsSessionProject = () => newProject(app.tenant.http);

/** The agent process above Chromium's main process (its command line names the agent's entry). */
async function agentOf(pid: number): Promise<number> {
  for (let current = pid; current > 1; ) {
    const cmdline = await readHostFile(`/proc/${current}/cmdline`, 'utf8');
    if (cmdline.includes('agent/src/main.js')) return current;
    const status = await readHostFile(`/proc/${current}/status`, 'utf8');
    current = Number(/^PPid:\s+(\d+)/m.exec(status)![1]);
  }
  throw new Error(`no agent above pid ${pid}`);
}

async function memoryOf(pid: number): Promise<{ rssMiB: number; hwmMiB: number }> {
  const status = await readHostFile(`/proc/${pid}/status`, 'utf8');
  const kib = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(status)![1]);
  return { rssMiB: Math.round(kib('VmRSS') / 1024), hwmMiB: Math.round(kib('VmHWM') / 1024) };
}

describe('out-of-order multipart (item 5)', () => {
  it('streams a large file part sent before its dest_path to disk, not memory', async () => {
    const size = 600 * MIB;
    const boundary = `----bp${Date.now()}`;
    const chunk = Buffer.alloc(MIB, 0x61);
    function* body() {
      yield Buffer.from(`--${boundary}\r\ncontent-disposition: form-data; name="files[0][file]"; filename="big.bin"\r\ncontent-type: application/octet-stream\r\n\r\n`);
      for (let sent = 0; sent < size; sent += MIB) yield chunk;
      yield Buffer.from(`\r\n--${boundary}\r\ncontent-disposition: form-data; name="files[0][dest_path]"\r\n\r\n/big-part.bin\r\n--${boundary}--\r\n`);
    }
    const before = await memoryOf(agentPid);
    let peakRss = before.rssMiB;
    const sampler = setInterval(() => {
      void memoryOf(agentPid).then((m) => (peakRss = Math.max(peakRss, m.rssMiB)), () => undefined);
    }, 100);
    let status: number;
    try {
      const res = await fetch(`${fs.client.baseUrl}/browsers/${fs.id}/fs/upload`, {
        method: 'POST',
        headers: { ...fs.client.extraHeaders, authorization: `Bearer ${fs.client.key}`, 'content-type': `multipart/form-data; boundary=${boundary}` },
        body: ReadableStream.from(body()),
        duplex: 'half',
      });
      status = res.status;
      console.log(`upload answered ${status}: ${await res.text()}`);
    } finally {
      clearInterval(sampler);
    }
    const after = await memoryOf(agentPid);
    console.log(
      `agent ${agentPid} memory for a ${size / MIB} MiB part before its dest_path: VmRSS ${before.rssMiB} → ${after.rssMiB} MiB (sampled peak ${peakRss} MiB), VmHWM ${before.hwmMiB} → ${after.hwmMiB} MiB`,
    );
    expect(status).toBe(204);
    expect((await stat(path.join(fs.hostRoot, 'big-part.bin'))).size).toBe(size);
    expect(after.hwmMiB - before.rssMiB).toBeLessThan(200);
    expect((await readdir(path.join(path.dirname(fs.hostRoot), 'tmp'))).filter((name) => name.startsWith('part-'))).toEqual([]);
    expect((await fsPut(fs, 'delete_file', { path: '/big-part.bin' })).status).toBe(204);
  });
});

/** Polls the agent's /health every 20 ms while `work` runs; the worst latency and whether every poll was answered. */
async function healthDuring<T>(work: Promise<T>): Promise<{ result: T; worstMs: number; polls: number; failures: number }> {
  let done = false;
  let worstMs = 0;
  let polls = 0;
  let failures = 0;
  const poller = (async () => {
    while (!done) {
      const started = performance.now();
      const ok = await fetch(`${agentUrl}/health`, { signal: AbortSignal.timeout(30_000) }).then(
        (res) => res.status === 200,
        () => false,
      );
      worstMs = Math.max(worstMs, performance.now() - started);
      polls++;
      if (!ok) failures++;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  })();
  try {
    return { result: await work, worstMs: Math.round(worstMs), polls, failures };
  } finally {
    done = true;
    await poller;
  }
}

/** Trees made from the host side belong to the browser's user, as the browser's own would. */
async function giveToBrowser(hostPath: string): Promise<void> {
  const owner = await stat(path.dirname(fs.hostRoot));
  const chown = spawnSync('chown', ['-R', `${owner.uid}:${owner.gid}`, hostPath]);
  if (chown.status !== 0) throw new Error(`chown failed: ${chown.stderr.toString()}`);
}

const zipOf = (virtual: string) => rawRequest(fs.client, 'GET', `/browsers/${fs.id}/fs/download_dir_zip?${new URLSearchParams({ path: virtual }).toString()}`);

describe('deep and large trees (items 5 and 6)', () => {
  it('refuses to create a path deeper than the limit, and creates one at it', async () => {
    const atLimit = `/deep${'/d'.repeat(63)}`;
    expect((await fsPut(fs, 'create_directory', { path: atLimit })).status).toBe(204);
    const res = await fsPut(fs, 'create_directory', { path: `${atLimit}/d` });
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('path_too_deep');
    expect((await fsPut(fs, 'delete_directory', { path: '/deep' })).status).toBe(204);
  });

  it('refuses a move that would carry a subtree past the depth limit, changing nothing', async () => {
    const deepA = `/ma${'/d'.repeat(62)}`; // 63 levels
    const deepB = `/mb${'/d'.repeat(62)}`; // 63 levels
    expect((await fsPut(fs, 'create_directory', { path: deepA })).status).toBe(204);
    expect((await fsPut(fs, 'create_directory', { path: deepB })).status).toBe(204);
    // /mb would land at level 64 with 62 levels below it: 126.
    const res = await fsPut(fs, 'move', { src_path: '/mb', dest_path: `${deepA}/mb` });
    console.log(`move of a 63-level tree under a 63-level one: ${res.status} ${res.text}`);
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('path_too_deep');
    expect((await stat(path.join(fs.hostRoot, deepB))).isDirectory()).toBe(true);
    expect(await stat(path.join(fs.hostRoot, deepA, 'mb')).catch(() => undefined)).toBeUndefined();
    // Writes go on (a tree past the limit would trip every quota walk).
    expect((await rawRequest(fs.client, 'PUT', `/browsers/${fs.id}/fs/write_file?path=/after-move.txt`, 'ok')).status).toBe(204);
    // A move that stays within the limit (64 levels) still goes through.
    expect((await fsPut(fs, 'move', { src_path: '/mb', dest_path: '/ma/mb' })).status).toBe(204);
    expect((await stat(path.join(fs.hostRoot, 'ma/mb', ...Array.from({ length: 62 }, () => 'd')))).isDirectory()).toBe(true);
    expect((await fsPut(fs, 'delete_directory', { path: '/ma' })).status).toBe(204);
    expect((await fsPut(fs, 'delete_file', { path: '/after-move.txt' })).status).toBe(204);
  });

  it('names the directory to delete when the browser made a tree past the limit, and writes go on once it is gone', async () => {
    mkdirSync(path.join(fs.hostRoot, 'browser-deep', ...Array.from({ length: 69 }, () => 'd')), { recursive: true });
    await giveToBrowser(path.join(fs.hostRoot, 'browser-deep'));
    const refused = await rawRequest(fs.client, 'PUT', `/browsers/${fs.id}/fs/write_file?path=/x.txt`, 'x');
    console.log(`write with a 70-level tree present: ${refused.status} ${refused.text}`);
    expect(refused.status).toBe(400);
    expect(refused.body.code).toBe('path_too_deep');
    const atLimit = `/browser-deep${'/d'.repeat(63)}`;
    expect(refused.body.message).toContain(`delete ${atLimit} `);
    expect((await fsPut(fs, 'delete_directory', { path: atLimit })).status).toBe(204);
    expect((await rawRequest(fs.client, 'PUT', `/browsers/${fs.id}/fs/write_file?path=/x.txt`, 'x')).status).toBe(204);
    expect((await fsPut(fs, 'delete_directory', { path: '/browser-deep' })).status).toBe(204);
    expect((await fsPut(fs, 'delete_file', { path: '/x.txt' })).status).toBe(204);
  });

  it('zips a 1,500-level chain (made from the host side, as the browser could) without stalling /health', async () => {
    mkdirSync(path.join(fs.hostRoot, 'chain', ...Array.from({ length: 1500 }, () => 'd')), { recursive: true });
    await giveToBrowser(path.join(fs.hostRoot, 'chain'));
    const { result, worstMs, polls, failures } = await healthDuring(zipOf('/chain'));
    console.log(`download_dir_zip of a 1,500-level chain: ${result.status} ${result.body.code ?? ''}; /health worst ${worstMs} ms over ${polls} polls, ${failures} failed`);
    expect(result.status).toBe(400);
    expect(result.body.code).toBe('path_too_deep');
    expect(failures).toBe(0);
    expect((await fsPut(fs, 'delete_directory', { path: '/chain' })).status).toBe(204);
  }, 120_000);

  it('zips a large tree while /health keeps answering', async () => {
    const base = path.join(fs.hostRoot, 'wide');
    let files = 0;
    for (let a = 0; a < 20; a++) {
      const dir = path.join(base, `a${a}`, ...Array.from({ length: 20 }, (_, i) => `l${i}`));
      mkdirSync(dir, { recursive: true });
      for (let f = 0; f < 500; f++, files++) writeFileSync(path.join(dir, `f${f}.txt`), `file ${a}/${f}\n`.repeat(50));
    }
    await giveToBrowser(base);
    const started = performance.now();
    const { result, worstMs, polls, failures } = await healthDuring(zipOf('/wide'));
    console.log(
      `download_dir_zip of ${files} files in 20 chains of 20 levels: ${result.status}, ${result.bytes.length} bytes in ${Math.round(performance.now() - started)} ms; /health worst ${worstMs} ms over ${polls} polls, ${failures} failed`,
    );
    expect(result.status).toBe(200);
    expect(failures).toBe(0);
    expect((await fsPut(fs, 'delete_directory', { path: '/wide' })).status).toBe(204);
  }, 180_000);
});
