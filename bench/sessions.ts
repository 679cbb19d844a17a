/**
 * Session benchmark. In one run, on this machine:
 * - baseline: bare Chromium (same binary, flags and unprivileged user as the agent) from
 *   spawn until its CDP endpoint answers;
 * - cold create: POST /browsers on the built service until the returned cdp_ws_url answers
 *   Browser.getVersion (a real WebSocket client through the service's CDP proxy), with its
 *   split: the POST answered (database, caps, agent start, Chromium start, readiness), then
 *   the first CDP answer (proxy, agent upgrade, the first command);
 * - memory (PSS and USS) of idle sessions (agent + Chromium tree) beside idle bare
 *   Chromiums, several of each at once, as browsers run in practice.
 * Targets from the issue: cold create ≤ 1.10x of the baseline (issue 20), under 25 MiB extra
 * per session.
 */
import { readdir, readFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import WebSocket from 'ws';
import { resolveSystemUser } from '../lib/system-user.js';
import { launchBareChromium } from './chromium.js';
import { cleanupServices, startService } from '../test/support/service.js';

const RUNS = Number(process.env.BENCH_SESSION_RUNS ?? 8);
const MEMORY_SESSIONS = Number(process.env.BENCH_MEMORY_SESSIONS ?? 5);
const SETTLE_MS = 700;

async function main(): Promise<void> {
  const user = await resolveSystemUser('browserplane');
  const baseline: number[] = [];
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

    // Memory with several idle browsers of each kind at once: the agents share Node's
    // code pages among themselves (and with the service), as they do in real use, so the
    // per-session PSS is the marginal cost of one more session, and USS (memory no other
    // process shares) is its floor.
    const bares = [];
    const sessions: string[] = [];
    for (let i = 0; i < MEMORY_SESSIONS; i++) {
      bares.push(await launchBareChromium(user));
      const res = await fetch(`${url}/browsers`, { method: 'POST', headers: auth, body: JSON.stringify({ headless: true, timeout_seconds: 600 }) });
      sessions.push(((await res.json()) as { session_id: string }).session_id);
    }
    await new Promise((resolve) => setTimeout(resolve, 5000)); // let all settle to idle
    const bareMem = await Promise.all(bares.map((b) => memoryOfTree(b.child.pid!)));
    const sessionMem = await Promise.all(
      sessions.map(async (id) => {
        const record = JSON.parse(await readFile(path.join(service.dataDir, 'browsers', `${id}.json`), 'utf8')) as { agentPid: number };
        return { tree: await memoryOfTree(record.agentPid), agent: await memoryOf(record.agentPid) };
      }),
    );
    await Promise.all(bares.map((b) => b.stop()));
    const mean = (values: number[]) => values.reduce((a, b) => a + b, 0) / values.length;
    const barePss = mean(bareMem.map((m) => m.pss));
    const bareUss = mean(bareMem.map((m) => m.uss));
    const sessionPss = mean(sessionMem.map((m) => m.tree.pss));
    const sessionUss = mean(sessionMem.map((m) => m.tree.uss));
    const agentPss = mean(sessionMem.map((m) => m.agent.pss));
    const agentUss = mean(sessionMem.map((m) => m.agent.uss));

    const p = (values: number[], q: number) => [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor(q * values.length))]!;
    console.log(`\nSessions: ${RUNS} alternating runs, headless, sandboxed as ${user?.name ?? os.userInfo().username}\n`);
    const row = (label: string, values: number[], goal = '') =>
      console.log(`| ${label} | ${p(values, 0.5).toFixed(0)} ms | ${p(values, 0.9).toFixed(0)} ms | ${(p(values, 0.5) / p(baseline, 0.5)).toFixed(2)}x${goal} |`);
    console.log('| measure | p50 | p90 | ratio to baseline p50 |');
    console.log('|---|---|---|---|');
    row('bare Chromium spawn → CDP answers (baseline)', baseline);
    row('cold create: POST /browsers → cdp_ws_url answers Browser.getVersion', answered, ` (goal ≤ 1.10x: ${p(answered, 0.5) <= 1.1 * p(baseline, 0.5) ? 'met' : 'not met'})`);
    row('  of which POST /browsers → session returned', created);
    row('  of which session returned → first CDP answer', firstCdp);
    console.log(`\nMemory: ${MEMORY_SESSIONS} idle sessions beside ${MEMORY_SESSIONS} idle bare Chromiums, mean per browser`);
    console.log('| idle process tree | PSS | USS (unshared) |');
    console.log('|---|---|---|');
    console.log(`| bare Chromium | ${mib(barePss)} MiB | ${mib(bareUss)} MiB |`);
    console.log(`| session (agent + Chromium) | ${mib(sessionPss)} MiB | ${mib(sessionUss)} MiB |`);
    console.log(`| of which the agent | ${mib(agentPss)} MiB | ${mib(agentUss)} MiB |`);
    console.log(`| session − bare | +${mib(sessionPss - barePss)} MiB (target < 25) | +${mib(sessionUss - bareUss)} MiB |`);
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

const mib = (bytes: number) => (bytes / 1024 / 1024).toFixed(1);

interface Memory {
  pss: number;
  uss: number;
}

/** PSS and USS (private clean + dirty) of one process, in bytes, from smaps_rollup. */
async function memoryOf(pid: number): Promise<Memory> {
  const rollup = await readFile(`/proc/${pid}/smaps_rollup`, 'utf8').catch(() => '');
  const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(rollup)?.[1] ?? 0) * 1024;
  return { pss: kb('Pss'), uss: kb('Private_Clean') + kb('Private_Dirty') };
}

/** Sums over a process and every descendant, from /proc. */
async function memoryOfTree(root: number): Promise<Memory> {
  const parents = new Map<number, number>();
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = await readFile(`/proc/${entry}/stat`, 'utf8').catch(() => '');
    const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    if (ppid) parents.set(Number(entry), ppid);
  }
  const inTree = (pid: number): boolean => {
    for (let p: number | undefined = pid; p; p = parents.get(p)) if (p === root) return true;
    return false;
  };
  const total: Memory = { pss: 0, uss: 0 };
  for (const pid of parents.keys()) {
    if (!inTree(pid)) continue;
    const m = await memoryOf(pid);
    total.pss += m.pss;
    total.uss += m.uss;
  }
  return total;
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});

