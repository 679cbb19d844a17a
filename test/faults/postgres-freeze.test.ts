import { readFileSync, readdirSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import pg from 'pg';
import { afterEach, describe, expect, it, onTestFailed } from 'vitest';
import { unique } from '../e2e/support/sdk.js';
import { cleanupServices, postgresPids, startService, type RunningService } from '../support/service.js';
import { eventually } from '../support/eventually.js';

/**
 * The embedded Postgres of a running service (the built one, no DATABASE_URL) freezes:
 * SIGSTOP on the postmaster and every backend, so connections stay open and TCP still
 * connects, but nothing ever answers. A keyed read must still answer, and with the
 * outage's error (503 database_unavailable, Retry-After), within a liveness bound: the
 * query timeout, the connect timeout and the wait for a busy pool's connection each end
 * it. More reads than the pool has connections run at once, so every path is taken.
 * After SIGCONT everything works again and no connection is left behind: the backends
 * of the connections given up during the freeze end, and pg_stat_activity counts no
 * more of the service's connections than before.
 */

/** Generous: the defaults bound a frozen read near 11 s; this only says it ends. */
const LIVENESS_BOUND_MS = 15_000;
const CLIENT_LIMIT_MS = 60_000;

let frozen: number[] = [];

afterEach(async () => {
  thaw();
  await cleanupServices();
});

function thaw(): void {
  for (const pid of frozen) {
    try {
      process.kill(pid, 'SIGCONT');
    } catch {
      // gone
    }
  }
  frozen = [];
}

function childrenOf(pid: number): number[] {
  const kids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      // Fields after the parenthesised name: state, ppid, ...
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === pid) kids.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return kids;
}

/** Stops the postmaster first (no new backends after), then every child it has. */
function freeze(postmaster: number): number {
  process.kill(postmaster, 'SIGSTOP');
  frozen.push(postmaster);
  for (const pid of childrenOf(postmaster)) {
    process.kill(pid, 'SIGSTOP');
    frozen.push(pid);
  }
  return frozen.length;
}

/** A client of our own, straight to the embedded cluster (its port from postmaster.pid, the superuser password from the data dir). */
async function adminClient(service: RunningService): Promise<pg.Client> {
  const lock = (await readFile(path.join(service.dataDir, 'postgres', 'postmaster.pid'), 'utf8')).split('\n');
  const password = (await readFile(path.join(service.dataDir, 'postgres-password'), 'utf8')).trim();
  const client = new pg.Client({ host: '127.0.0.1', port: Number(lock[3]), user: 'postgres', password, database: 'browserplane' });
  await client.connect();
  return client;
}

async function serviceConnections(admin: pg.Client): Promise<{ total: number; states: string[] }> {
  const { rows } = await admin.query<{ state: string | null; application_name: string }>(
    "SELECT state, application_name FROM pg_stat_activity WHERE datname = 'browserplane' AND pid <> pg_backend_pid() AND backend_type = 'client backend'",
  );
  return { total: rows.length, states: rows.map((r) => `${r.application_name}:${r.state ?? '?'}`).sort() };
}

interface Outcome {
  ms: number;
  status: number | 'network';
  code?: string;
  retryAfter?: string | null;
}

async function keyedRead(service: RunningService, key: string, route: string): Promise<Outcome> {
  const started = Date.now();
  try {
    const res = await fetch(`${service.url}${route}`, { headers: { authorization: `Bearer ${key}` }, signal: AbortSignal.timeout(CLIENT_LIMIT_MS) });
    const body = (await res.json()) as { code?: string };
    return { ms: Date.now() - started, status: res.status, code: body.code, retryAfter: res.headers.get('retry-after') };
  } catch {
    return { ms: Date.now() - started, status: 'network' };
  }
}

describe('the embedded Postgres freezes under a running service', () => {
  it('SIGSTOP on the postmaster and its backends: keyed reads answer 503 database_unavailable within a bound; after SIGCONT all works and no connection leaks', async () => {
    const service = await startService({ env: { BROWSERPLANE_STANDBY_AGENTS: '0' } });
    onTestFailed(() => console.log(service.logs().filter((l) => l.level !== 'info').slice(-20).map((l) => JSON.stringify(l).slice(0, 600)).join('\n')));
    const admin = service.client();
    const key = (await admin.apiKeys.create({ name: unique('freeze') })).key;
    const profile = await admin.profiles.create({ name: unique('freeze') });
    const route = `/profiles/${profile.id}`;
    // Warm the pool: idle connections are there to be taken when the server freezes.
    for (const r of await Promise.all(Array.from({ length: 4 }, () => keyedRead(service, key, route)))) expect(r.status).toBe(200);

    const db = await adminClient(service);
    const before = await serviceConnections(db);
    await db.end();
    const pids = postgresPids(service.dataDir);
    expect(pids).toHaveLength(1);
    const stopped = freeze(pids[0]!);

    // More at once than DATABASE_POOL_MAX (10): queries on idle connections, new
    // connections, and checkouts that wait for a busy pool all happen.
    const during = await Promise.all(Array.from({ length: 14 }, () => keyedRead(service, key, route)));
    thaw();
    const worstMs = Math.max(...during.map((o) => o.ms));

    // Back: the same read works, and the backends of connections given up on end.
    const recovered = await eventually(async () => ((await keyedRead(service, key, route)).status === 200 ? true : undefined), { timeoutMs: 30_000, intervalMs: 50, what: 'a keyed read to work again' });
    const db2 = await adminClient(service);
    let after = await serviceConnections(db2);
    await eventually(
      async () => {
        after = await serviceConnections(db2);
        return after.total <= before.total;
      },
      { timeoutMs: 30_000, intervalMs: 50, what: `the service's connections back to ${before.total}` },
    ).catch(() => undefined);
    await db2.end();
    // And the pool is whole: twice its size of reads at once all succeed.
    const load = await Promise.all(Array.from({ length: 20 }, () => keyedRead(service, key, route)));

    console.log(
      JSON.stringify({
        frozenProcesses: stopped,
        duringMs: during.map((o) => o.ms).sort((a, b) => a - b),
        worstMs,
        duringSeen: [...new Set(during.map((o) => `${o.status} ${o.code} retry-after=${o.retryAfter}`))],
        connectionsBefore: before,
        connectionsAfter: after,
        loadAfterMs: Math.max(...load.map((o) => o.ms)),
      }),
    );
    for (const o of during) {
      expect(`${o.status} ${o.code}`, JSON.stringify(o)).toBe('503 database_unavailable');
      expect(o.retryAfter).toMatch(/^\d+$/);
    }
    expect(worstMs, 'every read during the freeze answered within the liveness bound').toBeLessThan(LIVENESS_BOUND_MS);
    expect(recovered).toBe(true);
    expect(after.total, `service connections after (${after.states.join(', ')}) vs before (${before.states.join(', ')})`).toBeLessThanOrEqual(before.total);
    expect(after.states.filter((s) => s.includes('idle in transaction'))).toEqual([]);
    for (const o of load) expect(o.status).toBe(200);
  });
});
