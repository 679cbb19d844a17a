/**
 * Warm-spare create benchmark. In one run, on this machine:
 * - baseline: bare Chromium (same binary, flags and unprivileged user as the agent) from
 *   spawn until Browser.getVersion answers on its DevTools pipe;
 * - POST /browsers {headless: true} on the built service with warm spares on, from the
 *   request until the returned cdp_ws_url answers Browser.getVersion through the
 *   service's CDP proxy, split into "POST answered" and "first CDP answer";
 * - the same with settings applied after launch (name, tags, timeout, a viewport other
 *   than the spare's), which must not prevent the match.
 * Each create waits for its replacement spare first, as a user's creates spaced a few
 * seconds apart would find it. Goals from the issue: p50 ≤ 30 ms and p99 ≤ 105 ms
 * (Kernel's advertised create latency).
 */
import os from 'node:os';
import WebSocket from 'ws';
import { resolveSystemUser } from '../lib/system-user.js';
import { launchBareChromium } from './chromium.js';
import { cleanupServices, startService } from '../test/support/service.js';

const RUNS = Number(process.env.BENCH_SPARE_RUNS ?? 20);
const SETTLE_MS = 300;
const GOAL_P50_MS = 30;
const GOAL_P99_MS = 105;

interface Timed {
  total: number;
  post: number;
  cdp: number;
}

async function main(): Promise<void> {
  const user = await resolveSystemUser('browserplane');
  const service = await startService({ inheritEnv: true, env: { BROWSERPLANE_SPARE_BROWSERS: '2' } });
  const auth = { authorization: `Bearer ${service.adminKey}`, 'content-type': 'application/json' };
  const baseline: number[] = [];
  const plain: Timed[] = [];
  const withSettings: Timed[] = [];
  let claimed = 0;
  try {
    const spares = async () => {
      const text = await (await fetch(`${service.url}/metrics`)).text();
      return Number(/^browserplane_spare_browsers\{phase="running"\} (\d+)/m.exec(text)?.[1] ?? 0);
    };
    const waitForSpares = async () => {
      const deadline = Date.now() + 60_000;
      while ((await spares()) < 2) {
        if (Date.now() > deadline) throw new Error('no warm spare within 60 s');
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      await new Promise((resolve) => setTimeout(resolve, SETTLE_MS));
    };
    const records = async () => (await import('node:fs/promises')).readdir(`${service.dataDir}/browsers`).then((f) => new Set(f.filter((n) => n.endsWith('.json')).map((n) => n.slice(0, -5))));
    const create = async (body: Record<string, unknown>, count = true): Promise<Timed> => {
      await waitForSpares();
      const before = await records();
      const t0 = performance.now();
      const res = await fetch(`${service.url}/browsers`, { method: 'POST', headers: auth, body: JSON.stringify(body) });
      const session = (await res.json()) as { session_id: string; cdp_ws_url: string };
      const post = performance.now() - t0;
      if (res.status !== 200) throw new Error(`create failed: ${res.status} ${JSON.stringify(session)}`);
      await browserVersion(session.cdp_ws_url);
      const total = performance.now() - t0;
      if (before.has(session.session_id) && count) claimed++;
      await fetch(`${service.url}/browsers/${session.session_id}`, { method: 'DELETE', headers: auth });
      return { total, post, cdp: total - post };
    };
    // One cold create first: it is what teaches the service the configuration (the
    // default headless one is warmed from the start anyway).
    await create({ headless: true }, false);
    for (let i = 0; i < RUNS; i++) {
      const bare = await launchBareChromium(user);
      baseline.push(bare.readyMs);
      await bare.stop();
      plain.push(await create({ headless: true }));
      withSettings.push(await create({ headless: true, name: `bench-${i}`, tags: { run: String(i) }, timeout_seconds: 120, viewport: { width: 1280, height: 800 } }));
    }
  } finally {
    await service.stop();
    await cleanupServices();
  }

  const p = (values: number[], q: number) => [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.ceil(q * values.length) - 1)]!;
  const base = p(baseline, 0.5);
  const row = (name: string, timed: Timed[]) => {
    const total = timed.map((t) => t.total);
    return `| ${name} | ${p(total, 0.5).toFixed(1)} ms | ${p(total, 0.99).toFixed(1)} ms | ${(p(total, 0.5) / base).toFixed(3)}x | ${p(timed.map((t) => t.post), 0.5).toFixed(1)} ms | ${p(timed.map((t) => t.cdp), 0.5).toFixed(1)} ms |`;
  };
  console.log(`\nWarm-spare create: ${RUNS} runs each, headless, ${claimed}/${RUNS * 2} creates took a spare, load ${os.loadavg()[0]!.toFixed(2)}\n`);
  console.log('| measure | p50 | p99 | p50 / baseline p50 | POST answered p50 | first CDP answer p50 |');
  console.log('|---|---|---|---|---|---|');
  console.log(`| bare Chromium spawn → CDP answers (baseline) | ${base.toFixed(1)} ms | ${p(baseline, 0.99).toFixed(1)} ms | 1.000x | | |`);
  console.log(row('POST /browsers {headless} → cdp_ws_url answers, from a spare', plain));
  console.log(row('… with name, tags, timeout and another viewport', withSettings));
  const spareP50 = p(plain.map((t) => t.total), 0.5);
  const spareP99 = p(plain.map((t) => t.total), 0.99);
  console.log(
    `\nGoal p50 ≤ ${GOAL_P50_MS} ms: ${spareP50.toFixed(1)} ms (${spareP50 <= GOAL_P50_MS ? 'met' : 'NOT met'}); goal p99 ≤ ${GOAL_P99_MS} ms: ${spareP99.toFixed(1)} ms (${spareP99 <= GOAL_P99_MS ? 'met' : 'NOT met'})`,
  );
}

/** Opens the CDP WebSocket and resolves when Browser.getVersion answers. */
function browserVersion(url: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { perMessageDeflate: false });
    ws.once('open', () => ws.send(JSON.stringify({ id: 1, method: 'Browser.getVersion' })));
    ws.on('message', (data: Buffer) => {
      if ((JSON.parse(data.toString()) as { id?: number }).id !== 1) return;
      ws.close();
      resolve();
    });
    ws.once('error', reject);
  });
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
