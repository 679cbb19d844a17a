import { existsSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createHash } from 'node:crypto';
import pg from 'pg';
import { MAIN_JS, REPO_ROOT, type RunningService } from '../../support/service.js';
import { decodeKey, ENCRYPTION_KEY_FILE } from '../../../api/src/crypto/sealer.js';
import { agentTokensFrom, type AgentTokens } from '../../../contract/agent-client.js';

/**
 * What a killed-and-restarted service left behind, read from the places that can leak:
 * its database (rows in transient states), its runtime's state dir (records of agents),
 * the process table (agents, Chromium, Xvfb) and the shared work root of the local
 * runtime. Every finding is a sentence naming what leaked, so an assertion on the list
 * says exactly what went wrong.
 */

/** The local runtime's default work root (api/src/runtime/local-runtime.ts); shared by every service on the machine. */
export const WORK_ROOT = path.join(os.tmpdir(), 'browserplane-browsers');
const AGENT_ENTRY = path.join(REPO_ROOT, 'dist/agent/src/main.js');

/** Same naming as the local runtime's workDirName: long ids get a short stable name (Unix socket path limit). */
export function workDirOf(browserId: string): string {
  const name = browserId.length <= 24 ? browserId : createHash('sha256').update(browserId).digest('hex').slice(0, 16);
  return path.join(WORK_ROOT, name);
}

/** A client of the service's embedded Postgres (its port from the start-up log, its password from the data dir). */
export async function connectDatabase(service: RunningService): Promise<pg.Client> {
  const ready = service.logs().findLast((line) => line.msg === 'embedded Postgres ready');
  if (!ready || typeof ready.port !== 'number') throw new Error('the service logged no "embedded Postgres ready" line with a port');
  const password = (await readFile(path.join(service.dataDir, 'postgres-password'), 'utf8')).trim();
  const client = new pg.Client({ host: '127.0.0.1', port: ready.port, user: 'postgres', password, database: 'browserplane' });
  await client.connect();
  return client;
}

export interface RecordOnDisk {
  browserId: string;
  agentPid: number;
  agentUrl: string;
  workDir: string;
}

/** The agent tokens of the service whose data dir this is (its key file: the fault tests set no BROWSERPLANE_ENCRYPTION_KEY). */
async function agentTokensOf(dataDir: string): Promise<AgentTokens> {
  const key = decodeKey(await readFile(path.join(dataDir, ENCRYPTION_KEY_FILE), 'utf8'));
  if (!key) throw new Error(`${dataDir} holds no encryption key`);
  return agentTokensFrom(key);
}

/** The runtime's records (<data>/browsers/<id>.json). */
export async function runtimeRecords(dataDir: string): Promise<Map<string, RecordOnDisk>> {
  const dir = path.join(dataDir, 'browsers');
  const records = new Map<string, RecordOnDisk>();
  const files = await readdir(dir).catch(() => [] as string[]);
  for (const file of files.filter((f) => f.endsWith('.json'))) {
    const text = await readFile(path.join(dir, file), 'utf8').catch(() => undefined);
    if (text === undefined) continue; // removed meanwhile
    const record = JSON.parse(text) as RecordOnDisk;
    records.set(record.browserId, record);
  }
  return records;
}

export interface ProcessInfo {
  pid: number;
  cmdline: string;
  /** Only read for agents (node running the agent entry). */
  environ?: Record<string, string>;
}

export async function processTable(): Promise<ProcessInfo[]> {
  const out: ProcessInfo[] = [];
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const cmdline = (await readFile(`/proc/${entry}/cmdline`, 'utf8').catch(() => '')).split('\0').join(' ');
    if (!cmdline) continue;
    const info: ProcessInfo = { pid: Number(entry), cmdline };
    if (cmdline.includes(AGENT_ENTRY)) {
      const raw = await readFile(`/proc/${entry}/environ`, 'utf8').catch(() => '');
      info.environ = Object.fromEntries(
        raw
          .split('\0')
          .filter(Boolean)
          .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
      );
    }
    out.push(info);
  }
  return out;
}

/** The browser an agent process serves, from its environment, or 'standby' (started without a spec; its claim is not in its environment). */
function agentBrowserId(info: ProcessInfo): string | undefined {
  const env = info.environ ?? {};
  if (env.AGENT_SPEC) {
    try {
      return (JSON.parse(env.AGENT_SPEC) as { browserId?: string }).browserId;
    } catch {
      return undefined;
    }
  }
  return env.AGENT_STANDBY === '1' ? 'standby' : undefined;
}

export interface AccountingInput {
  db: pg.Client;
  dataDir: string;
  /** Pids of every service process that ran on this data dir (standby agents name their parent). */
  servicePids: number[];
  /** The current service's pid: its own standby agents are expected. */
  currentPid: number;
}

/**
 * Every browser process, record and work dir of this data dir's sessions must belong to a
 * live session row, and every live session row must have a live, ready agent. Returns one
 * sentence per leak; an empty list means nothing is orphaned.
 */
export async function orphanedBrowsers(input: AccountingInput): Promise<string[]> {
  const problems: string[] = [];
  const { rows: all } = await input.db.query<{ id: string; live: boolean }>('SELECT id, deleted_at IS NULL AS live FROM browser_sessions');
  const ours = new Set(all.map((r) => r.id));
  const live = new Set(all.filter((r) => r.live).map((r) => r.id));
  const records = await runtimeRecords(input.dataDir);
  const recordedPids = new Set([...records.values()].map((r) => r.agentPid));

  for (const id of records.keys()) if (!live.has(id)) problems.push(`runtime record ${id}.json has no live session row`);
  for (const id of live) {
    const record = records.get(id);
    if (!record) {
      problems.push(`live session ${id} has no runtime record (its browser is unaccounted for)`);
      continue;
    }
    const health = await fetch(`${record.agentUrl}/health?wait_ms=2000`, { signal: AbortSignal.timeout(3000), headers: { authorization: `Bearer ${(await agentTokensOf(input.dataDir))(id)}` } })
      .then((r) => r.json() as Promise<{ status?: string; browser_id?: string }>)
      .catch(() => undefined);
    if (health?.status !== 'ready' || health.browser_id !== id) problems.push(`live session ${id}: its agent (pid ${record.agentPid}) is not ready (${JSON.stringify(health)})`);
  }

  for (const proc of await processTable()) {
    if (proc.environ) {
      const browserId = agentBrowserId(proc);
      const parent = Number(proc.environ.AGENT_PARENT_PID);
      if (browserId === 'standby') {
        // A standby of a dead service must be gone, or claimed and recorded.
        if (input.servicePids.includes(parent) && parent !== input.currentPid && !recordedPids.has(proc.pid)) {
          problems.push(`agent pid ${proc.pid} (a standby of the killed service ${parent}) is running with no record`);
        }
      } else if (browserId && ours.has(browserId) && !(live.has(browserId) && records.get(browserId)?.agentPid === proc.pid)) {
        problems.push(`agent pid ${proc.pid} of browser ${browserId} is running, but ${live.has(browserId) ? 'its record names another pid' : 'its session ended'}`);
      }
      continue;
    }
    for (const id of ours) {
      if (!live.has(id) && proc.cmdline.includes(`${workDirOf(id)}/`)) {
        problems.push(`pid ${proc.pid} (${proc.cmdline.slice(0, 60)}…) runs in the work dir of ended session ${id}`);
      }
    }
  }
  for (const id of ours) if (!live.has(id) && existsSync(workDirOf(id))) problems.push(`work dir ${workDirOf(id)} of ended session ${id} is left`);
  return problems;
}

/** Rows created before `before` still in a transient state: sessions starting, flows running. */
export async function transientRows(db: pg.Client, before: Date): Promise<string[]> {
  const problems: string[] = [];
  const starting = await db.query<{ id: string; pool_id: string | null }>(
    `SELECT id, pool_id FROM browser_sessions WHERE deleted_at IS NULL AND phase <> 'running' AND created_at < $1`,
    [before],
  );
  for (const r of starting.rows) problems.push(`session ${r.id}${r.pool_id ? ` (pool ${r.pool_id})` : ''} is still starting after the restart`);
  const unreasoned = await db.query<{ id: string }>('SELECT id FROM browser_sessions WHERE deleted_at IS NOT NULL AND deleted_reason IS NULL');
  for (const r of unreasoned.rows) problems.push(`session ${r.id} ended with no recorded reason`);
  return problems;
}

/** Deterministic randomness for kill moments (mulberry32), so a failing seed replays. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Fails early with a clear message when the built agent is missing (the runtime spawns it). */
export function assertAgentBuilt(): void {
  if (!existsSync(AGENT_ENTRY)) throw new Error(`${AGENT_ENTRY} is missing: run \`make build\` first`);
}

export { MAIN_JS };
