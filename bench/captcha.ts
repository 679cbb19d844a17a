/**
 * The price of captcha being on by default: a session created with `telemetry: {enabled:
 * true}` now opens the agent's CDP capture and puts the captcha observer (a MutationObserver
 * that does nothing until a widget appears) into every page. In one run, alternating, sessions
 * with the default categories and with the same minus captcha: launch-to-ready (POST
 * /browsers answering), then with a page open and idle, PSS of the session's process tree
 * (agent, wrapper, Chromium) and of its agent alone, and the CPU the tree spent idle.
 */
import { readdir, readFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { cleanupServices, startService } from '../test/support/service.js';
import { startTestPageServer } from '../test/support/test-page-server.js';

const ROUNDS = Number(process.env.BENCH_CAPTCHA_ROUNDS ?? 3);
const IDLE_MS = Number(process.env.BENCH_CAPTCHA_IDLE_MS ?? 10_000);
const KINDS = {
  default: { enabled: true },
  without_captcha: { enabled: true, browser: { captcha: { enabled: false } } },
} as const;

interface Proc {
  ppid: number;
  name: string;
  pss: number;
  ticks: number;
}

async function processTable(): Promise<Map<number, Proc>> {
  const table = new Map<number, Proc>();
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = await readFile(`/proc/${entry}/stat`, 'utf8').catch(() => '');
    if (!stat) continue;
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const rollup = await readFile(`/proc/${entry}/smaps_rollup`, 'utf8').catch(() => '');
    const pss = Number(/^Pss:\s+(\d+) kB/m.exec(rollup)?.[1] ?? 0) * 1024;
    table.set(Number(entry), { ppid: Number(fields[1]), name: stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')), pss, ticks: Number(fields[11]) + Number(fields[12]) });
  }
  return table;
}

function tree(table: Map<number, Proc>, root: number): { pss: number; agentPss: number; ticks: number } {
  const out = { pss: 0, agentPss: table.get(root)?.pss ?? 0, ticks: 0 };
  for (const [pid, info] of table) {
    let p: number | undefined = pid;
    while (p && p !== root) p = table.get(p)?.ppid;
    if (p !== root) continue;
    out.pss += info.pss;
    out.ticks += info.ticks;
  }
  return out;
}

const mean = (values: number[]) => values.reduce((a, b) => a + b, 0) / values.length;

async function main(): Promise<void> {
  const service = await startService({ inheritEnv: true, echoStderr: true });
  const pages = await startTestPageServer({ '/idle': '<!doctype html><title>idle</title><p>An idle page with <a href="#x">a link</a>.</p>' });
  const auth = { authorization: `Bearer ${service.adminKey}`, 'content-type': 'application/json' };
  const figures: Record<string, { launchMs: number[]; pss: number[]; agentPss: number[]; cpuMs: number[] }> = {};
  try {
    for (let round = 0; round < ROUNDS; round++) {
      for (const [kind, telemetry] of Object.entries(KINDS)) {
        const started = performance.now();
        const res = await fetch(`${service.url}/browsers`, { method: 'POST', headers: auth, body: JSON.stringify({ headless: true, telemetry }) });
        const launchMs = performance.now() - started;
        const body = (await res.json()) as { session_id: string; cdp_ws_url: string };
        if (res.status !== 200) throw new Error(`create failed: ${res.status} ${JSON.stringify(body)}`);
        const browser = await chromium.connectOverCDP(body.cdp_ws_url);
        const page = await (browser.contexts()[0] ?? (await browser.newContext())).newPage();
        await page.goto(`${pages.url}/idle`);
        const { agentPid } = JSON.parse(await readFile(path.join(service.dataDir, 'browsers', `${body.session_id}.json`), 'utf8')) as { agentPid: number };
        await new Promise((resolve) => setTimeout(resolve, 2000));
        const before = tree(await processTable(), agentPid);
        await new Promise((resolve) => setTimeout(resolve, IDLE_MS));
        const after = tree(await processTable(), agentPid);
        const f = (figures[kind] ??= { launchMs: [], pss: [], agentPss: [], cpuMs: [] });
        f.launchMs.push(launchMs);
        f.pss.push(after.pss);
        f.agentPss.push(after.agentPss);
        f.cpuMs.push(((after.ticks - before.ticks) * 1000) / 100);
        await browser.close().catch(() => undefined);
        await fetch(`${service.url}/browsers/${body.session_id}`, { method: 'DELETE', headers: auth });
      }
    }
    const mib = (n: number) => (n / 2 ** 20).toFixed(1);
    console.log(`captcha cost, ${ROUNDS} rounds on ${os.cpus().length} cores, idle window ${IDLE_MS} ms`);
    for (const [kind, f] of Object.entries(figures)) {
      console.log(
        `${kind.padEnd(16)} launch ${mean(f.launchMs).toFixed(0)} ms [${f.launchMs.map((v) => v.toFixed(0)).join(', ')}]  tree PSS ${mib(mean(f.pss))} MiB  agent PSS ${mib(mean(f.agentPss))} MiB  idle CPU ${mean(f.cpuMs).toFixed(0)} ms`,
      );
    }
  } finally {
    await pages.close();
    await cleanupServices();
  }
}

await main();
