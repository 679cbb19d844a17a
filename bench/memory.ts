/**
 * Idle session memory. In one run, on this machine, several of each kind at once (as
 * browsers run in practice, so shared pages are shared as they would be):
 * - baseline: idle bare Chromiums (same binary, flags and unprivileged user as the agent);
 * - embedded mode: idle headless sessions of the built service (agent, namespace wrapper
 *   and Chromium: the whole tree the session's agent leads);
 * - Kubernetes-like: the agent as the browser image runs it (`node dist/agent/src/main.js`
 *   as the unprivileged user, AGENT_SPEC in the environment, no wrapper), which is what
 *   a browser pod holds beside Chromium.
 * PSS counts shared pages split among their users (the marginal cost of one more
 * browser); USS (private clean + dirty) is memory no other process shares, the floor.
 * Goal from the issue: an idle session ≤ 1.05x a bare Chromium (PSS). Beside them, standby
 * agents as the embedded runtime starts them (one per service), and the CPU each agent
 * spent starting: every refill launch and every standby pays one start.
 *
 * Then the price of the agent's lean flags (AGENT_NODE_FLAGS): 1,000 Runtime.evaluate
 * round trips through a session's cdp_ws_url beside the same over a bare Chromium's pipe,
 * in alternating blocks, with the CPU the agent spent on them.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { chown, mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { resolveSystemUser } from '../lib/system-user.js';
import WebSocket from 'ws';
import { launchBareChromium, type BareChromium } from './chromium.js';
import { cleanupServices, REPO_ROOT, startService } from '../test/support/service.js';
import { readReportedPort, spawnAgent } from '../api/src/runtime/agent-process.js';

const SESSIONS = Number(process.env.BENCH_MEMORY_SESSIONS ?? 3);
const SETTLE_MS = Number(process.env.BENCH_MEMORY_SETTLE_MS ?? 5000);
const GOAL = 1.05;
const ROUND_TRIPS = Number(process.env.BENCH_MEMORY_ROUND_TRIPS ?? 1000);
const BLOCKS = 4;

interface Memory {
  pss: number;
  uss: number;
}

interface Tree {
  total: Memory;
  /** By role: agent (node), wrapper (bwrap), chromium. */
  parts: Record<string, Memory>;
}

async function main(): Promise<void> {
  const user = await resolveSystemUser('browserplane');
  const service = await startService({ inheritEnv: true, echoStderr: true });
  const bares: BareChromium[] = [];
  const pods: PodAgent[] = [];
  const standbys: PodAgent[] = [];
  const scratch = await mkdtemp(path.join(os.tmpdir(), 'bp-memory-'));
  if (user) await chown(scratch, user.uid, user.gid);
  try {
    const auth = { authorization: `Bearer ${service.adminKey}`, 'content-type': 'application/json' };
    const sessions: string[] = [];
    const cdpUrls: string[] = [];
    // Interleaved, so each kind starts under the same load.
    for (let i = 0; i < SESSIONS; i++) {
      bares.push(await launchBareChromium(user));
      const res = await fetch(`${service.url}/browsers`, { method: 'POST', headers: auth, body: JSON.stringify({ headless: true, timeout_seconds: 600 }) });
      const body = (await res.json()) as { session_id: string; cdp_ws_url: string };
      if (res.status !== 200) throw new Error(`create failed: ${res.status} ${JSON.stringify(body)}`);
      sessions.push(body.session_id);
      cdpUrls.push(body.cdp_ws_url);
      pods.push(await startPodAgent(scratch, `memory-pod-${i}`, user));
      standbys.push(await startStandbyAgent(scratch, `memory-standby-${i}`));
    }
    await new Promise((resolve) => setTimeout(resolve, SETTLE_MS));
    const table = await processTable();
    const bareMem = bares.map((b) => memoryOfTree(table, b.child.pid!));
    const agentPids = await Promise.all(
      sessions.map(async (id) => (JSON.parse(await readFile(path.join(service.dataDir, 'browsers', `${id}.json`), 'utf8')) as { agentPid: number }).agentPid),
    );
    const sessionMem = agentPids.map((pid) => memoryOfTree(table, pid));
    const podMem = pods.map((p) => memoryOfTree(table, p.child.pid!));
    const standbyMem = meanOf(standbys.map((p) => memoryOfTree(table, p.child.pid!)));

    const bare = meanOf(bareMem);
    const session = meanOf(sessionMem);
    const pod = meanOf(podMem);
    const load = os.loadavg().map((l) => l.toFixed(2)).join(' ');
    console.log(`\nMemory: ${SESSIONS} idle headless sessions, ${SESSIONS} browser-pod agents and ${SESSIONS} bare Chromiums at once, mean per browser (load ${load})\n`);
    console.log('| idle process tree | PSS | USS (unshared) | PSS ratio to bare |');
    console.log('|---|---|---|---|');
    const row = (name: string, m: Memory) => console.log(`| ${name} | ${mib(m.pss)} MiB | ${mib(m.uss)} MiB | ${(m.pss / bare.total.pss).toFixed(3)}x |`);
    row('bare Chromium (baseline)', bare.total);
    row(`embedded session (goal ≤ ${GOAL.toFixed(2)}x)`, session.total);
    for (const [part, m] of Object.entries(session.parts)) if (part !== 'chromium') console.log(`| … of which ${part} | ${mib(m.pss)} MiB | ${mib(m.uss)} MiB | |`);
    console.log(`| embedded session − bare | +${mib(session.total.pss - bare.total.pss)} MiB | +${mib(session.total.uss - bare.total.uss)} MiB | |`);
    row('Kubernetes-like pod (agent as the image runs it + Chromium)', pod.total);
    for (const [part, m] of Object.entries(pod.parts)) if (part !== 'chromium') console.log(`| … of which ${part} | ${mib(m.pss)} MiB | ${mib(m.uss)} MiB | |`);
    console.log(`| pod − bare (per-pod overhead) | +${mib(pod.total.pss - bare.total.pss)} MiB | +${mib(pod.total.uss - bare.total.uss)} MiB | |`);
    console.log(`| standby agent (embedded: one per service, waiting to be claimed) | ${mib(standbyMem.total.pss)} MiB | ${mib(standbyMem.total.uss)} MiB | |`);
    const meanMs = (xs: number[]) => (xs.reduce((sum, x) => sum + x, 0) / xs.length).toFixed(0);
    console.log(`\nAgent start, CPU (user + system) of the agent process alone, mean of ${SESSIONS}:`);
    console.log(`- pod-like agent, spawn → browser ready: ${meanMs(pods.map((p) => p.startCpuMs))} ms (${pods.map((p) => p.startCpuMs).join(', ')})`);
    console.log(`- standby agent, spawn → waiting to be claimed: ${meanMs(standbys.map((p) => p.startCpuMs))} ms (${standbys.map((p) => p.startCpuMs).join(', ')})`);
    const verdict = session.total.pss / bare.total.pss <= GOAL ? 'met' : 'not met';
    console.log(`\nGoal (embedded session ≤ ${GOAL}x bare, PSS): ${(session.total.pss / bare.total.pss).toFixed(3)}x, ${verdict}`);

    // CDP through the agent beside CDP over the bare pipe, alternating blocks.
    const viaAgent = await cdpClient(cdpUrls[0]!);
    const viaPipe: Command = (method, params, sessionId) => bares[0]!.command(method, params, sessionId);
    const bareTarget = await pageSession(viaPipe);
    const agentTarget = await pageSession(viaAgent.command);
    const times = { bare: 0, agent: 0, agentCpu: 0 };
    for (let block = 0; block < BLOCKS; block++) {
      times.bare += await roundTrips((expression) => viaPipe('Runtime.evaluate', { expression }, bareTarget), ROUND_TRIPS / BLOCKS);
      const cpu0 = cpuMs(agentPids[0]!);
      times.agent += await roundTrips((expression) => viaAgent.command('Runtime.evaluate', { expression }, agentTarget), ROUND_TRIPS / BLOCKS);
      times.agentCpu += cpuMs(agentPids[0]!) - cpu0;
    }
    viaAgent.close();
    console.log(`\nCDP: ${ROUND_TRIPS} Runtime.evaluate round trips, ${BLOCKS} alternating blocks (agent started with its own flags; see AGENT_NODE_FLAGS)\n`);
    console.log('| path | total | per round trip | ratio to bare |');
    console.log('|---|---|---|---|');
    console.log(`| bare Chromium, DevTools pipe (baseline) | ${times.bare.toFixed(0)} ms | ${((times.bare / ROUND_TRIPS) * 1000).toFixed(0)} µs | 1.00x |`);
    console.log(`| session cdp_ws_url (service, agent, pipe) | ${times.agent.toFixed(0)} ms | ${((times.agent / ROUND_TRIPS) * 1000).toFixed(0)} µs | ${(times.agent / times.bare).toFixed(2)}x |`);
    console.log(`| … CPU the agent spent | ${times.agentCpu.toFixed(0)} ms | ${((times.agentCpu / ROUND_TRIPS) * 1000).toFixed(0)} µs | |`);
  } finally {
    await Promise.all(bares.map((b) => b.stop()));
    await Promise.all([...pods, ...standbys].map((p) => p.stop()));
    await service.stop();
    await cleanupServices();
    await rm(scratch, { recursive: true, force: true });
  }
}

type Command = (method: string, params?: Record<string, unknown>, sessionId?: string) => Promise<unknown>;

/** A flat CDP session on the browser's first page. */
async function pageSession(command: Command): Promise<string> {
  const { targetInfos } = (await command('Target.getTargets')) as { targetInfos: { targetId: string; type: string }[] };
  const page = targetInfos.find((t) => t.type === 'page');
  if (!page) throw new Error('no page target');
  return ((await command('Target.attachToTarget', { targetId: page.targetId, flatten: true })) as { sessionId: string }).sessionId;
}

async function roundTrips(evaluate: (expression: string) => Promise<unknown>, count: number): Promise<number> {
  const t0 = performance.now();
  for (let i = 0; i < count; i++) await evaluate(`${i}+1`);
  return performance.now() - t0;
}

async function cdpClient(url: string): Promise<{ command: Command; close(): void }> {
  const ws = new WebSocket(url);
  await new Promise((resolve, reject) => {
    ws.once('open', resolve);
    ws.once('error', reject);
  });
  const pending = new Map<number, (message: { result?: unknown; error?: { message: string } }) => void>();
  ws.on('message', (data: Buffer) => {
    const message = JSON.parse(data.toString()) as { id?: number; result?: unknown; error?: { message: string } };
    const waiter = message.id === undefined ? undefined : pending.get(message.id);
    if (!waiter) return;
    pending.delete(message.id!);
    waiter(message);
  });
  let next = 1;
  const command: Command = (method, params = {}, sessionId) =>
    new Promise((resolve, reject) => {
      const id = next++;
      pending.set(id, (message) => (message.error ? reject(new Error(message.error.message)) : resolve(message.result)));
      ws.send(JSON.stringify({ id, method, params, ...(sessionId ? { sessionId } : {}) }));
    });
  return { command, close: () => ws.close() };
}

/** User + system CPU of one process so far, in ms (clock ticks of 10 ms). */
function cpuMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

interface PodAgent {
  child: ChildProcess;
  /** CPU the agent spent from its spawn until it was ready (or, a standby, waiting). */
  startCpuMs: number;
  stop(): Promise<void>;
}

/** A standby agent as the embedded runtime starts one (its flags, as root): what each create claims. */
async function startStandbyAgent(scratch: string, name: string): Promise<PodAgent> {
  const token = randomBytes(32).toString('base64url');
  const portFile = path.join(scratch, `${name}.port`);
  const child = await spawnAgent({ agentEntry: path.join(REPO_ROOT, 'dist/agent/src/main.js'), port: 0, portFile, logFile: path.join(scratch, `${name}.log`), logLevel: 'warn', standbyToken: token });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const deadline = Date.now() + 30_000;
  for (;;) {
    const port = await readReportedPort(portFile);
    const health = port ? await fetch(`http://127.0.0.1:${port}/health`).then((r) => r.json() as Promise<{ status?: string }>, () => undefined) : undefined;
    if (health?.status === 'standby') break;
    if (child.exitCode !== null || Date.now() > deadline) throw new Error(`standby agent ${name} did not start`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  const startCpuMs = cpuMs(child.pid!);
  return {
    child,
    startCpuMs,
    async stop() {
      child.kill('SIGTERM');
      await exited;
    },
  };
}

/**
 * The agent as docker/browser.Dockerfile starts it (its CMD: Node's flags and the entry),
 * unprivileged, on a spec of its own, without the image's tini; ready when /health says so.
 */
async function startPodAgent(scratch: string, browserId: string, user: { uid: number; gid: number } | undefined): Promise<PodAgent> {
  const token = randomBytes(32).toString('base64url');
  const portFile = path.join(scratch, `${browserId}.port`);
  const command = JSON.parse(/^CMD (\[.*\])$/m.exec(readFileSync(path.join(REPO_ROOT, 'docker/browser.Dockerfile'), 'utf8'))?.[1] ?? '["dist/agent/src/main.js"]') as string[];
  const child = spawn(process.execPath, command, {
    cwd: REPO_ROOT,
    ...(user ? { uid: user.uid, gid: user.gid } : {}),
    env: {
      PATH: process.env.PATH,
      HOME: scratch,
      AGENT_SPEC: JSON.stringify({ browserId, headless: true }),
      AGENT_TOKEN: token,
      AGENT_PORT: '0',
      AGENT_PORT_FILE: portFile,
      AGENT_WORK_DIR: path.join(scratch, browserId),
      LOG_LEVEL: 'warn',
      ...(process.env.CHROME_PATH ? { CHROME_PATH: process.env.CHROME_PATH } : {}),
    },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const deadline = Date.now() + 30_000;
  for (;;) {
    const port = Number((await readFile(portFile, 'utf8').catch(() => '')).trim());
    const health = port ? await fetch(`http://127.0.0.1:${port}/health`).then((r) => r.json() as Promise<{ status?: string }>, () => undefined) : undefined;
    if (health?.status === 'ready') break;
    if (child.exitCode !== null || Date.now() > deadline) throw new Error(`pod-like agent ${browserId} did not become ready`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return {
    child,
    startCpuMs: cpuMs(child.pid!),
    async stop() {
      child.kill('SIGTERM');
      await exited;
    },
  };
}

interface ProcessInfo extends Memory {
  ppid: number;
  name: string;
}

async function processTable(): Promise<Map<number, ProcessInfo>> {
  const table = new Map<number, ProcessInfo>();
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = await readFile(`/proc/${entry}/stat`, 'utf8').catch(() => '');
    if (!stat) continue;
    const name = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
    const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    const rollup = await readFile(`/proc/${entry}/smaps_rollup`, 'utf8').catch(() => '');
    const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(rollup)?.[1] ?? 0) * 1024;
    table.set(Number(entry), { ppid, name, pss: kb('Pss'), uss: kb('Private_Clean') + kb('Private_Dirty') });
  }
  return table;
}

function roleOf(name: string): string {
  if (name === 'node' || name.startsWith('MainThread')) return 'agent';
  if (name === 'bwrap' || name === 'setpriv') return 'wrapper';
  return 'chromium';
}

/** PSS and USS summed over a process and every descendant, by role. */
function memoryOfTree(table: Map<number, ProcessInfo>, root: number): Tree {
  const inTree = (pid: number): boolean => {
    for (let p: number | undefined = pid; p; p = table.get(p)?.ppid) if (p === root) return true;
    return false;
  };
  const tree: Tree = { total: { pss: 0, uss: 0 }, parts: {} };
  for (const [pid, info] of table) {
    if (!inTree(pid)) continue;
    const part = (tree.parts[roleOf(info.name)] ??= { pss: 0, uss: 0 });
    for (const target of [tree.total, part]) {
      target.pss += info.pss;
      target.uss += info.uss;
    }
  }
  return tree;
}

function meanOf(trees: Tree[]): Tree {
  const mean = (pick: (t: Tree) => Memory | undefined): Memory => ({
    pss: trees.reduce((sum, t) => sum + (pick(t)?.pss ?? 0), 0) / trees.length,
    uss: trees.reduce((sum, t) => sum + (pick(t)?.uss ?? 0), 0) / trees.length,
  });
  const parts = [...new Set(trees.flatMap((t) => Object.keys(t.parts)))].sort();
  return { total: mean((t) => t.total), parts: Object.fromEntries(parts.map((p) => [p, mean((t) => t.parts[p])])) };
}

const mib = (bytes: number) => (bytes / 1024 / 1024).toFixed(1);

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
