import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from 'vitest';
import { eventually } from '../support/eventually.js';
import { cleanupServices, startService, type RunningService } from '../support/service.js';
import { sseBlocks } from '../support/sse.js';
import { startOwnedPostgres, type OwnedPostgres } from './support/postgres.js';

/**
 * Postgres taken away from a running service under a steady mixed load, and given back:
 * once by a fast shutdown (what an operator's restart does) and once by SIGKILL on the
 * postmaster (a crash; Postgres runs crash recovery at the next start). The service is
 * the built one as a process, pointed at a Postgres this file owns through DATABASE_URL.
 *
 * A browser create and a pool's warm launch are in flight when Postgres goes: the
 * launch finishes during the outage and the row that records it cannot be written,
 * which is where a session would be left stuck in 'starting' with a browser nobody owns.
 */

const POOL_MAX = 6;
const OUTAGE_MS = 4_000;
/** After Postgres is back, every kind of request must succeed within this. */
const RECOVERY_BOUND_MS = 15_000;
const REQUEST_TIMEOUT_MS = 20_000;

let postgres: OwnedPostgres;
let service: RunningService;
let crashed: string | undefined;
let poolName: string;
let sessionId: string;

interface Outcome {
  kind: string;
  at: number;
  ms: number;
  status: number | 'network' | 'timeout';
  code?: string;
  body?: Record<string, unknown>;
}

async function call(method: string, route: string, body?: unknown, kind = `${method} ${route}`): Promise<Outcome> {
  const at = Date.now();
  try {
    const res = await fetch(`${service.url}${route}`, {
      method,
      headers: { authorization: `Bearer ${service.adminKey}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
    });
    const text = await res.text();
    let parsed: Record<string, unknown> | undefined;
    try {
      parsed = text ? (JSON.parse(text) as Record<string, unknown>) : undefined;
    } catch {
      parsed = { unparsed: text };
    }
    return { kind, at, ms: Date.now() - at, status: res.status, ...(typeof parsed?.code === 'string' ? { code: parsed.code } : {}), ...(parsed ? { body: parsed } : {}) };
  } catch (error) {
    const timeout = error instanceof Error && error.name === 'TimeoutError';
    return { kind, at, ms: Date.now() - at, status: timeout ? 'timeout' : 'network' };
  }
}

const ok = (o: Outcome) => typeof o.status === 'number' && o.status >= 200 && o.status < 300;
const unique = (prefix: string) => `${prefix}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;

/** Every kind of request the load sends; creates record what they made so it can be looked for afterwards. */
function operations(created: Map<string, string>, leases: Set<string>): Record<string, () => Promise<Outcome>> {
  const create = async (kind: string, route: string, body: unknown) => {
    const out = await call('POST', route, body, kind);
    if (ok(out) && typeof out.body?.id === 'string') created.set(`${route}/${out.body.id}`, kind);
    return out;
  };
  return {
    list_browsers: () => call('GET', '/browsers', undefined, 'list_browsers'),
    get_browser: () => call('GET', `/browsers/${sessionId}`, undefined, 'get_browser'),
    list_profiles: () => call('GET', '/profiles', undefined, 'list_profiles'),
    create_profile: () => create('create_profile', '/profiles', { name: unique('p') }),
    create_credential: () => create('create_credential', '/credentials', { name: unique('c'), domain: 'example.com', values: { username: 'u', password: 'secret' } }),
    create_proxy: () => create('create_proxy', '/proxies', { type: 'custom', name: unique('x'), config: { host: '127.0.0.1', port: 9 } }),
    create_project: () => create('create_project', '/org/projects', { name: unique('proj') }),
    acquire_release: async () => {
      const acquired = await call('POST', `/browser_pools/${poolName}/acquire`, { acquire_timeout_seconds: 1 }, 'acquire');
      if (acquired.status !== 200) return acquired;
      const id = String(acquired.body!.session_id);
      leases.add(id);
      const released = await call('POST', `/browser_pools/${poolName}/release`, { session_id: id }, 'release');
      if (ok(released)) leases.delete(id);
      return released;
    },
  };
}

interface Load {
  outcomes: Outcome[];
  created: Map<string, string>;
  /** Leases this client holds: a release that failed is retried after the outage, as a client would. */
  leases: Set<string>;
  stop(): Promise<void>;
}

function startLoad(workers: number): Load {
  const outcomes: Outcome[] = [];
  const created = new Map<string, string>();
  const leases = new Set<string>();
  const ops = operations(created, leases);
  const kinds = Object.keys(ops);
  let stopped = false;
  let n = 0;
  const loops = Array.from({ length: workers }, async () => {
    while (!stopped) {
      outcomes.push(await ops[kinds[n++ % kinds.length]!]!());
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  });
  return {
    outcomes,
    created,
    leases,
    async stop() {
      stopped = true;
      await Promise.all(loops);
    },
  };
}

/** /healthz and /readyz every 200 ms. */
function watchProbes(): { samples: Array<{ at: number; healthz: Outcome; readyz: Outcome }>; stop(): Promise<void> } {
  const samples: Array<{ at: number; healthz: Outcome; readyz: Outcome }> = [];
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      const at = Date.now();
      const [healthz, readyz] = await Promise.all([call('GET', '/healthz'), call('GET', '/readyz')]);
      samples.push({ at, healthz, readyz });
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  })();
  return {
    samples,
    async stop() {
      stopped = true;
      await loop;
    },
  };
}

/**
 * An invocation's event stream read the way a client reads it: frames as they come, and
 * on an error frame or a closed stream, a new request. Resolves with the status seen last
 * once the stream has closed after a terminal state.
 */
function followInvocation(id: string): { done: Promise<string>; reconnects: () => number; errors: string[] } {
  const errors: string[] = [];
  let reconnects = -1;
  const done = (async () => {
    for (;;) {
      reconnects++;
      let last: string | undefined;
      try {
        const res = await fetch(`${service.url}/invocations/${id}/events`, {
          headers: { authorization: `Bearer ${service.adminKey}`, accept: 'text/event-stream' },
        });
        if (res.status !== 200) {
          errors.push(`status ${res.status}`);
          await new Promise((resolve) => setTimeout(resolve, 500));
          continue;
        }
        for await (const block of sseBlocks(res.body!)) {
          const data = block.data[0];
          if (data === undefined) continue;
          const payload = JSON.parse(data) as { event: string; invocation?: { status: string }; error?: { code: string } };
          if (payload.event === 'invocation_state') last = payload.invocation!.status;
          if (payload.event === 'error') errors.push(payload.error!.code);
        }
      } catch (error) {
        errors.push(`stream failed: ${String(error)}`);
      }
      if (last === 'succeeded') return last;
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
  })();
  return { done, reconnects: () => reconnects, errors };
}

async function query<T extends pg.QueryResultRow>(sql: string, params: unknown[] = []): Promise<T[]> {
  const client = new pg.Client({ connectionString: postgres.url, application_name: 'faults-test' });
  await client.connect();
  try {
    return (await client.query<T>(sql, params)).rows;
  } finally {
    await client.end();
  }
}

beforeAll(async () => {
  postgres = await startOwnedPostgres();
  service = await startService({
    env: { DATABASE_URL: postgres.url, DATABASE_POOL_MAX: String(POOL_MAX), BROWSERPLANE_STANDBY_AGENTS: '0', BROWSERPLANE_BROWSER_LAUNCH_TIMEOUT_MS: '20000' },
  });
  void service.exited.then((exit) => (crashed = JSON.stringify(exit)));
  poolName = unique('pool');
  // A short lease timeout: an acquire whose answer is lost in the outage (the lease committed,
  // the response failed) leaves a lease nobody holds, which the idle timeout takes back.
  const pool = await call('POST', '/browser_pools', { name: poolName, size: 2, headless: true, fill_rate_per_minute: 6000, timeout_seconds: 10 });
  expect(pool.status, JSON.stringify(pool.body)).toBe(200);
  const session = await call('POST', '/browsers', { headless: true, timeout_seconds: 600 });
  expect(session.status, JSON.stringify(session.body)).toBe(200);
  sessionId = String(session.body!.session_id);
  await eventually(async () => (await call('GET', `/browser_pools/${poolName}`)).body?.available_count === 2, { timeoutMs: 60_000, intervalMs: 100, what: 'the pool to be full', retryErrors: true });
}, 180_000);

afterAll(async () => {
  await cleanupServices();
  await postgres?.destroy();
});

describe.each([
  { how: 'a fast shutdown', takeAway: () => postgres.stopFast() },
  { how: 'SIGKILL on the postmaster', takeAway: () => postgres.kill() },
])('Postgres goes away under load ($how) and comes back', ({ takeAway }) => {
  it('fails requests fast and clearly meanwhile, recovers every kind of request, and leaves nothing stuck', async () => {
    onTestFailed(() => {
      const problems = service.logs().filter((line) => line.level !== 'info');
      console.log(`service exit: ${crashed ?? 'none'}\n${problems.slice(-25).map((l) => JSON.stringify(l).slice(0, 600)).join('\n')}\n${service.stderr.slice(-20).join('\n')}`);
    });
    const invocation = await call('POST', '/invocations', { app_name: 'faults', action_name: 'run', version: '1', async: true });
    expect(invocation.status).toBe(202);
    const events = followInvocation(String(invocation.body!.id));
    const probes = watchProbes();
    const load = startLoad(4);
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    const before = await postgres.connections();

    // A create and a pool's warm launch in flight: admitted (a 'starting' row), not yet recorded as running.
    const starting = (pooled: boolean) =>
      query(`SELECT 1 FROM browser_sessions WHERE deleted_at IS NULL AND phase = 'starting' AND (pool_id IS NOT NULL) = $1`, [pooled]);
    // A flush ends only idle browsers, and the load's acquirers (four, on a pool of two) may
    // hold both at the moment it lands: flush again until one is ended and being replaced.
    await eventually(
      async () => {
        if ((await starting(true)).length > 0) return true;
        await call('POST', `/browser_pools/${poolName}/flush`);
        await new Promise((resolve) => setTimeout(resolve, 250));
        return (await starting(true)).length > 0;
      },
      { timeoutMs: 60_000, intervalMs: 100, what: 'a pool launch in flight', retryErrors: true },
    );
    const inFlight = call('POST', '/browsers', { headless: true, timeout_seconds: 600 }, 'in_flight_create');
    const launching = await eventually(
      async () => {
        const rows = await query<{ id: string; pooled: boolean }>(
          `SELECT id, pool_id IS NOT NULL AS pooled FROM browser_sessions WHERE deleted_at IS NULL AND phase = 'starting'`,
        );
        // The pool's launch may finish first on a slow machine: end an idle browser again.
        if (!rows.some((r) => r.pooled)) await call('POST', `/browser_pools/${poolName}/flush`);
        return rows.some((r) => r.pooled) && rows.some((r) => !r.pooled) && rows.map((r) => r.id);
      },
      { timeoutMs: 20_000, intervalMs: 100, what: 'a create and a pool launch in flight', retryErrors: true },
    );

    const down = Date.now();
    await takeAway();
    const stopped = Date.now();
    // The outage lasts until both launches have finished, so recording them finds no database.
    const launched = (id: string) => service.logs().some((line) => line.msg === 'browser launched' && line.browser_id === id);
    await eventually(() => Promise.resolve(launching.every(launched)), { timeoutMs: 45_000, intervalMs: 100, what: 'the in-flight launches to finish', retryErrors: true });
    await new Promise((resolve) => setTimeout(resolve, Math.max(1_000, OUTAGE_MS - (Date.now() - stopped))));
    const restarting = Date.now();
    await postgres.start();
    const up = Date.now();

    // Every kind of request succeeds again within the bound, measured from Postgres accepting connections.
    const ops = operations(load.created, load.leases);
    const recoveredAfter: Record<string, number> = {};
    await Promise.all(
      Object.entries(ops).map(async ([kind, op]) => {
        await eventually(async () => ok(await op()), { timeoutMs: RECOVERY_BOUND_MS, intervalMs: 100, what: `${kind} to succeed again`, retryErrors: true });
        recoveredAfter[kind] = Date.now() - up;
      }),
    );
    const createAnswer = await inFlight;
    await load.stop();
    await probes.stop();

    // Leases a failed release left held are released now, as the client retries.
    for (const id of load.leases) {
      const out = await call('POST', `/browser_pools/${poolName}/release`, { session_id: id });
      expect([204, 200, 404], JSON.stringify(out)).toContain(out.status);
    }

    const during = load.outcomes.filter((o) => o.at >= stopped && o.at + o.ms <= restarting);
    const failed = during.filter((o) => !ok(o));
    const failMs = failed.map((o) => o.ms).sort((a, b) => a - b);
    const p = (q: number) => failMs[Math.min(failMs.length - 1, Math.floor(q * failMs.length))] ?? 0;
    console.log(
      JSON.stringify({
        takeAwayMs: stopped - down,
        restartMs: up - restarting,
        outageMs: up - down,
        recoveredAfterMs: recoveredAfter,
        duringOutage: { requests: during.length, failed: failed.length, failP50Ms: p(0.5), failP95Ms: p(0.95), failMaxMs: p(1) },
        failures: [...new Set(failed.map((o) => `${o.status} ${o.code ?? '-'}`))],
        inFlightCreate: `${createAnswer.status} ${createAnswer.code ?? ''}`,
        connectionsBefore: before,
        sse: { reconnects: events.reconnects(), errors: events.errors },
      }),
    );

    expect(crashed, 'the service process exited').toBeUndefined();
    expect(during.length).toBeGreaterThan(0);
    // Meanwhile: a clear error with the error model, fast; a request never hangs on a database that is gone.
    for (const o of failed) {
      expect(o.status, JSON.stringify(o)).toBe(503);
      expect(o.body, JSON.stringify(o)).toMatchObject({ code: 'database_unavailable', message: expect.any(String) });
    }
    expect(p(0.95)).toBeLessThan(2_000);
    const outageProbes = probes.samples.filter((s) => s.at >= stopped && s.at + 2_500 <= restarting);
    expect(outageProbes.length).toBeGreaterThan(0);
    for (const s of outageProbes) expect(`${s.readyz.status} ${s.readyz.code}`).toBe('503 database_unreachable');
    for (const s of probes.samples) expect(s.healthz.status).toBe(200);
    expect((await call('GET', '/readyz')).status).toBe(200);

    // Nothing that answered 2xx was lost.
    for (const [route, kind] of load.created) expect(`${kind} ${(await call('GET', route)).status}`).toBe(`${kind} 200`);

    // The invocation's stream reconnected (or stayed) and saw a change made after the outage.
    expect((await call('PATCH', `/invocations/${String(invocation.body!.id)}`, { status: 'succeeded' })).status).toBe(200);
    await expect(Promise.race([events.done, new Promise((resolve) => setTimeout(() => resolve('no terminal state within 15 s'), 15_000))])).resolves.toBe('succeeded');

    // No session stuck in 'starting', no browser without a live session, the pool full and unleased.
    await eventually(async () => (await query(`SELECT 1 FROM browser_sessions WHERE deleted_at IS NULL AND phase = 'starting'`)).length === 0, { timeoutMs: 45_000, intervalMs: 100, what: 'no session stuck in starting', retryErrors: true });
    if (ok(createAnswer)) expect((await call('GET', `/browsers/${String(createAnswer.body!.session_id)}`)).status).toBe(200);
    await eventually(
      async () => {
        const pool = (await call('GET', `/browser_pools/${poolName}`)).body;
        return pool?.available_count === 2 && pool.acquired_count === 0;
      },
      { timeoutMs: 45_000, intervalMs: 100, what: 'the pool to be full and unleased', retryErrors: true },
    ).catch(async (error: unknown) => {
      const rows = await query(`SELECT id, phase, leased_at, lease_seq, deleted_reason FROM browser_sessions WHERE pool_id IS NOT NULL AND deleted_at IS NULL`);
      const leases = load.outcomes.filter((o) => o.kind === 'acquire' && o.status === 200).map((o) => o.body?.session_id);
      throw new Error(`${String(error)}: pool ${JSON.stringify((await call('GET', `/browser_pools/${poolName}`)).body)}, rows ${JSON.stringify(rows)}, acquired ${JSON.stringify(leases.slice(-5))}, held ${JSON.stringify([...load.leases])}`);
    });
    const live = new Set((await query<{ id: string }>('SELECT id FROM browser_sessions WHERE deleted_at IS NULL')).map((r) => r.id));
    await eventually(() => Promise.resolve(browserRecords().every((id) => live.has(id))), { timeoutMs: 30_000, intervalMs: 100, what: 'every browser record to belong to a live session', retryErrors: true });
    expect(browserRecords().sort()).toEqual([...live].sort());

    // The pool's connections come back to their level: no client lost to a dead server is still counted.
    const after = await eventually(
      async () => {
        const now = await postgres.connections();
        return (now.browserplane ?? 0) <= POOL_MAX && now['browserplane-events'] === 1 && now;
      },
      { timeoutMs: 30_000, intervalMs: 100, what: 'connections back to their level', retryErrors: true },
    );
    console.log(JSON.stringify({ connectionsAfter: after }));
    expect(after.browserplane ?? 0).toBeLessThanOrEqual(Math.max(before.browserplane ?? 0, POOL_MAX));
  });
});

/** Browser ids the service's runtime keeps a record of (one file per browser it runs). */
function browserRecords(): string[] {
  const dir = path.join(service.dataDir, 'browsers');
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .filter((name) => name.endsWith('.json'))
    .map((name) => name.replace(/\.json$/, ''));
}
