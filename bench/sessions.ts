/**
 * Session benchmark. In one run, on this machine:
 * - baseline: bare Chromium (same binary, flags and unprivileged user as the agent) from
 *   spawn until its CDP endpoint answers;
 * - cold create: POST /browsers on the built service until the returned cdp_ws_url answers
 *   Browser.getVersion (a real WebSocket client through the service's CDP proxy), with its
 *   split: the POST answered (database, caps, agent start, Chromium start, readiness), then
 *   the first CDP answer (proxy, agent upgrade, the first command).
 * Warm spares are off here (the test harness's default), so every create starts Chromium;
 * bench/spares.ts measures the creates that take a spare, bench/memory.ts idle memory.
 * - the floor: bare Chromium's second command, sent the moment its first is answered.
 * Goal from issue 20: cold create ≤ 1.10x of the baseline.
 */
import os from 'node:os';
import WebSocket from 'ws';
import { resolveSystemUser } from '../lib/system-user.js';
import { launchBareChromium } from './chromium.js';
import { cleanupServices, startService } from '../test/support/service.js';

const RUNS = Number(process.env.BENCH_SESSION_RUNS ?? 8);
const SETTLE_MS = 700;

async function main(): Promise<void> {
  const user = await resolveSystemUser('browserplane');
  const baseline: number[] = [];
  const secondAnswer: number[] = [];
  const created: number[] = [];
  const answered: number[] = [];
  const firstCdp: number[] = [];
  const service = await startService({ inheritEnv: true, echoStderr: true });
  try {
    const url = service.url;
    const auth = { authorization: `Bearer ${service.adminKey}`, 'content-type': 'application/json' };
    // Alternate the two so drift in machine load hits both alike, and let the machine
    // settle before each measure: a closing browser, or the standby agent the runtime
    // starts after each create, would otherwise slow whichever measure comes next.
    const settle = () => new Promise((resolve) => setTimeout(resolve, SETTLE_MS));
    for (let i = 0; i < RUNS; i++) {
      await settle();
      const bare = await launchBareChromium(user);
      baseline.push(bare.readyMs);
      // A second command, sent the moment the first is answered: Chromium is then at its
      // busiest (its first tab is still being made), and any client behind something that
      // waits for Chromium's first answer (an agent's readiness check, a session to attach)
      // sends its own first command no sooner than this.
      const sent = performance.now();
      await bare.command('Browser.getVersion');
      secondAnswer.push(bare.readyMs + performance.now() - sent);
      await bare.stop();
      await settle();
      const t0 = performance.now();
      const res = await fetch(`${url}/browsers`, { method: 'POST', headers: auth, body: JSON.stringify({ headless: true }) });
      const session = (await res.json()) as { session_id: string; cdp_ws_url: string };
      const posted = performance.now();
      if (res.status !== 200) throw new Error(`create failed: ${res.status} ${JSON.stringify(session)}`);
      await browserVersion(session.cdp_ws_url);
      const done = performance.now();
      created.push(posted - t0);
      answered.push(done - t0);
      firstCdp.push(done - posted);
      await fetch(`${url}/browsers/${session.session_id}`, { method: 'DELETE', headers: auth });
    }

    const p = (values: number[], q: number) => [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor(q * values.length))]!;
    console.log(`\nSessions: ${RUNS} alternating runs, headless, sandboxed as ${user?.name ?? os.userInfo().username}\n`);
    const row = (label: string, values: number[], goal = '') =>
      console.log(`| ${label} | ${p(values, 0.5).toFixed(0)} ms | ${p(values, 0.9).toFixed(0)} ms | ${(p(values, 0.5) / p(baseline, 0.5)).toFixed(2)}x${goal} |`);
    console.log('| measure | p50 | p90 | ratio to baseline p50 |');
    console.log('|---|---|---|---|');
    row('bare Chromium spawn → CDP answers (baseline)', baseline);
    row('bare Chromium spawn → a second command, sent at the first answer, answered', secondAnswer);
    row('cold create: POST /browsers → cdp_ws_url answers Browser.getVersion', answered, ` (goal ≤ 1.10x: ${p(answered, 0.5) <= 1.1 * p(baseline, 0.5) ? 'met' : 'not met'})`);
    row('  of which POST /browsers → session returned', created);
    row('  of which session returned → first CDP answer', firstCdp);
    console.log(
      `\nAgainst the second-command floor: cold create ${(p(answered, 0.5) / p(secondAnswer, 0.5)).toFixed(2)}x; the floor itself is ${(p(secondAnswer, 0.5) / p(baseline, 0.5)).toFixed(2)}x the baseline (docs/performance.md, Cold create).`,
    );
  } finally {
    await service.stop();
    await cleanupServices();
  }
}

/**
 * Connects to a session's cdp_ws_url as a client would (through the service's CDP proxy)
 * and resolves once Browser.getVersion is answered.
 */
function browserVersion(url: string, timeoutMs = 30_000): Promise<void> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { perMessageDeflate: false });
    const timer = setTimeout(() => fail(new Error(`no answer from ${url} within ${timeoutMs} ms`)), timeoutMs);
    const fail = (error: Error) => {
      clearTimeout(timer);
      ws.terminate();
      reject(error);
    };
    ws.once('open', () => ws.send(JSON.stringify({ id: 1, method: 'Browser.getVersion' })));
    ws.on('message', (data: Buffer) => {
      const message = JSON.parse(data.toString('utf8')) as { id?: number; error?: { message: string } };
      if (message.id !== 1) return;
      clearTimeout(timer);
      ws.close();
      if (message.error) reject(new Error(`Browser.getVersion failed: ${message.error.message}`));
      else resolve();
    });
    ws.once('unexpected-response', (_request, response) => fail(new Error(`${url} refused the upgrade: ${response.statusCode}`)));
    ws.once('error', fail);
  });
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
