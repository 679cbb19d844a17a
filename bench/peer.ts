/**
 * Peer benchmark: a page loaded in a fresh browser, client side, the same steps everywhere
 * (playwright-core connectOverCDP → new page → goto → load event) against
 * - raw Chromium (the baseline): spawned as the agent spawns it (binary, flags, user) but
 *   with a DevTools port instead of the pipe, so the client can reach it; spawn → loaded;
 * - Browserplane create: POST /browsers {headless: true} → connect to its cdp_ws_url → loaded;
 * - Browserplane acquire from a warm pool: acquire → connect → loaded (then release);
 * - Browserless (when BENCH_PEER=browserless): connect to its WebSocket, which launches a
 *   Chromium for the connection → loaded. scripts/browserless.sh installs it first.
 * The page is served over loopback by the bench: HTML, a script and an image, so "loaded"
 * covers subresources. Rounds alternate the four, in a rotating order, with a pause before
 * each measure, so drift in machine load hits all alike. p50/p90 and ratios to raw Chromium.
 */
import { spawn } from 'node:child_process';
import { chown, mkdtemp, rm } from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { BASE_FLAGS } from '../agent/src/chromium.js';
import { resolveSystemUser, type SystemUser } from '../lib/system-user.js';
import { CHROMIUM } from './chromium.js';
import { installBrowserless, liveGroups, signalGroup, startBrowserless, type RunningBrowserless } from './peer-browserless.js';
import { cleanupServices, startService, type RunningService } from '../test/support/service.js';

const ROUNDS = positiveInteger('BENCH_PEER_ROUNDS', 10);
const PEER = process.env.BENCH_PEER ?? '';
const POOL_SIZE = positiveInteger('BENCH_PEER_POOL_SIZE', 3);
// Long enough for a closed browser, or the standby agent started after a create, to settle.
const SETTLE_MS = positiveInteger('BENCH_PEER_SETTLE_MS', 1000);
const STEP_TIMEOUT_MS = 60_000;
const POOL_FILL_TIMEOUT_MS = 120_000;

const PIXEL_PNG = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==', 'base64');
const PAGE_HTML =
  '<!doctype html><html><head><title>peer bench</title><script src="/app.js"></script></head>' +
  '<body><h1>peer bench</h1><img src="/pixel.png" alt=""></body></html>';

/** One measure: from its start until the page's load event, and until the client had a CDP connection. */
interface Sample {
  connectedMs: number;
  loadedMs: number;
}

interface Contender {
  name: string;
  /** Starts the clock itself (what counts differs: a spawn, a POST, a connection) and cleans up after. */
  measure(pageUrl: string): Promise<Sample>;
  samples: Sample[];
}

async function main(): Promise<void> {
  if (PEER !== '' && PEER !== 'browserless') throw new Error(`BENCH_PEER=${PEER}: the only peer is browserless`);
  // Install before anything starts: a failed install then leaves nothing to clean up.
  const installed = PEER === 'browserless' ? installBrowserless() : undefined;
  const user = await resolveSystemUser('browserplane');
  const pages = await startPageServer();
  let service: RunningService | undefined;
  let browserless: RunningBrowserless | undefined;
  let poolRoute: string | undefined;
  let stopping: Promise<void> | undefined;
  // Once, from the end of the run or from Ctrl-C, whichever comes first.
  stopAll = () =>
    (stopping ??= (async () => {
      // Never let a failed stop keep the service and its browsers running.
      await browserless?.stop().catch((error: unknown) => console.error('peer bench: stopping Browserless:', error));
      if (service && poolRoute) await apiOf(service)('DELETE', poolRoute, { force: true }).catch(() => undefined);
      await service?.stop();
      await cleanupServices();
      await pages.close();
    })());
  try {
    // The product's defaults: warm spares on, so a create that matches one takes it.
    service = await startService({ inheritEnv: true, echoStderr: true, env: { BROWSERPLANE_SPARE_BROWSERS: process.env.BROWSERPLANE_SPARE_BROWSERS ?? '2' } });
    const api = apiOf(service);
    poolRoute = `/browser_pools/${(await api('POST', '/browser_pools', { name: 'bench-peer', size: POOL_SIZE, fill_rate_per_minute: 6000, headless: true })).id as string}`;
    await waitForIdle(api, poolRoute);
    const contenders: Contender[] = [
      { name: 'raw Chromium: spawn → loaded (baseline)', measure: (url) => rawChromium(user, url), samples: [] },
      { name: 'Browserplane: POST /browsers → loaded (warm spares on)', measure: (url) => browserplaneCreate(api, url), samples: [] },
      { name: `Browserplane: acquire (pool of ${POOL_SIZE}) → loaded`, measure: (url) => browserplaneAcquire(api, poolRoute!, url), samples: [] },
    ];
    if (installed) {
      browserless = await startBrowserless(installed, { concurrent: 2 });
      const wsUrl = browserless.wsUrl;
      contenders.push({ name: `Browserless ${browserless.version}: connect → loaded`, measure: (url) => connectAndLoad(wsUrl, url, performance.now()), samples: [] });
    }
    printMachine(user);
    for (let round = 0; round < ROUNDS; round++) {
      for (let k = 0; k < contenders.length; k++) {
        const contender = contenders[(round + k) % contenders.length]!;
        await sleep(SETTLE_MS);
        contender.samples.push(await contender.measure(`${pages.url}/?round=${round}`));
      }
      // Progress on stderr: a round takes seconds, a busy machine's ten rounds minutes.
      console.error(`peer bench: round ${round + 1}/${ROUNDS} done`);
    }
    printResults(contenders);
    if (!installed) console.log('\nBrowserless not measured: `make bench-peer` (or BENCH_PEER=browserless) installs it and adds it to the table.');
  } finally {
    await stopAll();
  }
}

/** connectOverCDP → new page → goto → load, then checks the script ran and the image arrived. */
async function connectAndLoad(wsUrl: string, pageUrl: string, t0: number): Promise<Sample> {
  const browser = await chromium.connectOverCDP(wsUrl, { timeout: STEP_TIMEOUT_MS });
  try {
    const connectedMs = performance.now() - t0;
    const context = browser.contexts()[0] ?? (await browser.newContext());
    const page = await context.newPage();
    await page.goto(pageUrl, { waitUntil: 'load', timeout: STEP_TIMEOUT_MS });
    const loadedMs = performance.now() - t0;
    const loaded = await page.evaluate('window.benchScriptRan === true && document.images[0].naturalWidth === 1');
    if (loaded !== true) throw new Error(`${wsUrl}: the page's load event came without its script or image`);
    return { connectedMs, loadedMs };
  } finally {
    await browser.close();
  }
}

/** Chromium as the agent starts it, but on a DevTools port (the pipe is the agent's alone), measured from spawn. */
async function rawChromium(user: SystemUser | undefined, pageUrl: string): Promise<Sample> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'bp-peer-raw-'));
  if (user) await chown(dir, user.uid, user.gid);
  const flags = BASE_FLAGS.filter((flag) => flag !== '--remote-debugging-pipe');
  const t0 = performance.now();
  const child = spawn(CHROMIUM, [...flags, '--remote-debugging-port=0', `--user-data-dir=${dir}`, '--headless', '--window-size=1920,1080', 'about:blank'], {
    ...(user ? { uid: user.uid, gid: user.gid } : {}),
    env: { HOME: dir, TMPDIR: dir, PATH: process.env.PATH ?? '/usr/bin:/bin' },
    stdio: ['ignore', 'ignore', 'pipe'],
    detached: true,
  });
  liveGroups.add(child.pid!);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  try {
    const wsUrl = await new Promise<string>((resolve, reject) => {
      let stderr = '';
      const timer = setTimeout(() => reject(new Error(`raw Chromium printed no DevTools URL within ${STEP_TIMEOUT_MS} ms: ${stderr.slice(-500)}`)), STEP_TIMEOUT_MS);
      child.stderr.on('data', (chunk: Buffer) => {
        stderr = (stderr + chunk.toString()).slice(-4000);
        const found = /DevTools listening on (ws:\/\/\S+)/.exec(stderr);
        if (found) {
          clearTimeout(timer);
          resolve(found[1]!);
        }
      });
      void exited.then(() => {
        clearTimeout(timer);
        reject(new Error(`raw Chromium exited: ${stderr.slice(-500)}`));
      });
    });
    return await connectAndLoad(wsUrl, pageUrl, t0);
  } finally {
    signalGroup(child.pid!, 'SIGKILL');
    await exited;
    liveGroups.delete(child.pid!);
    await rm(dir, { recursive: true, force: true });
  }
}

type Api = (method: 'GET' | 'POST' | 'DELETE', route: string, body?: unknown) => Promise<Record<string, unknown>>;

function apiOf(service: RunningService): Api {
  return async (method, route, body) => {
    const res = await fetch(service.url + route, {
      method,
      headers: { authorization: `Bearer ${service.adminKey}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await res.text();
    if (!res.ok) throw new Error(`${method} ${route}: ${res.status} ${text}`);
    return text ? (JSON.parse(text) as Record<string, unknown>) : {};
  };
}

async function browserplaneCreate(api: Api, pageUrl: string): Promise<Sample> {
  const t0 = performance.now();
  const session = await api('POST', '/browsers', { headless: true });
  try {
    return await connectAndLoad(String(session.cdp_ws_url), pageUrl, t0);
  } finally {
    await api('DELETE', `/browsers/${String(session.session_id)}`);
  }
}

/** From a full pool: each acquire finds an idle browser, and the release's reset is waited out before the next. */
async function browserplaneAcquire(api: Api, route: string, pageUrl: string): Promise<Sample> {
  const t0 = performance.now();
  const lease = await api('POST', `${route}/acquire`, {});
  try {
    return await connectAndLoad(String(lease.cdp_ws_url), pageUrl, t0);
  } finally {
    await api('POST', `${route}/release`, { session_id: lease.session_id, reuse: true });
    await waitForIdle(api, route);
  }
}

async function waitForIdle(api: Api, route: string): Promise<void> {
  const t0 = performance.now();
  while (((await api('GET', route)).available_count as number) < POOL_SIZE) {
    if (performance.now() - t0 > POOL_FILL_TIMEOUT_MS) throw new Error(`pool ${route} not back to ${POOL_SIZE} idle browsers within ${POOL_FILL_TIMEOUT_MS} ms`);
    await sleep(50);
  }
}

async function startPageServer(): Promise<{ url: string; close(): Promise<void> }> {
  const server = http.createServer((request, response) => {
    const route = new URL(request.url ?? '/', 'http://bench').pathname;
    const [type, body] =
      route === '/app.js' ? ['text/javascript', 'window.benchScriptRan = true;'] : route === '/pixel.png' ? ['image/png', PIXEL_PNG] : ['text/html; charset=utf-8', PAGE_HTML];
    // Never from a cache: a reused pool browser must fetch what a fresh one fetches.
    response.writeHead(200, { 'content-type': type, 'cache-control': 'no-store' });
    response.end(body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections();
        server.close((error) => (error ? reject(error) : resolve()));
      }),
  };
}

function printMachine(user: SystemUser | undefined): void {
  const cpus = os.cpus();
  console.log(`\nMachine: ${cpus.length} cores (${cpus[0]?.model ?? 'unknown'}), load average ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}`);
  console.log(`Raw Chromium and Browserplane's browsers run as ${user?.name ?? os.userInfo().username}; Browserless runs its Chromium as ${os.userInfo().username}, --no-sandbox`);
}

function printResults(contenders: Contender[]): void {
  const baseline = contenders[0]!.samples.map((s) => s.loadedMs);
  const base50 = quantile(baseline, 0.5);
  const base90 = quantile(baseline, 0.9);
  console.log(`\nA page with a script and an image over loopback, in a fresh browser: ${ROUNDS} rounds, each contender once per round, rotating order\n`);
  console.log('| contender | samples | connected p50 ms | loaded p50 ms | loaded p90 ms | p50 vs raw | p90 vs raw |');
  console.log('|---|---|---|---|---|---|---|');
  for (const { name, samples } of contenders) {
    const loaded = samples.map((s) => s.loadedMs);
    const p50 = quantile(loaded, 0.5);
    const p90 = quantile(loaded, 0.9);
    const connected = quantile(samples.map((s) => s.connectedMs), 0.5);
    console.log(`| ${name} | ${samples.length} | ${connected.toFixed(0)} | ${p50.toFixed(0)} | ${p90.toFixed(0)} | ${(p50 / base50).toFixed(2)}x | ${(p90 / base90).toFixed(2)}x |`);
  }
}

function positiveInteger(name: string, fallback: number): number {
  const value = Number(process.env[name] ?? fallback);
  if (!Number.isInteger(value) || value < 1) throw new Error(`${name}=${process.env[name]}: expected a positive integer`);
  return value;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const quantile = (values: number[], q: number) => [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor(q * values.length))]!;

/** Stops what main started: set by main, called by its end or by a signal. */
let stopAll: (() => Promise<void>) | undefined;

// Ctrl-C stops the service, Browserless and the pool as the end of a run does; a second
// Ctrl-C exits at once through the exit hooks, which kill whatever is left.
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    console.error(`peer bench: ${signal}, stopping what it started`);
    void (stopAll?.() ?? Promise.resolve()).finally(() => process.exit(130));
  });
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
