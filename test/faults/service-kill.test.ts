import type Kernel from '@onkernel/sdk';
import type pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { PASSWORD, startLoginSites, USERNAME, type LoginSites } from '../fixtures/login-sites/server.js';
import { unique } from '../e2e/support/sdk.js';
import { cleanupServices, startService, type LogLine, type RunningService } from '../support/service.js';
import { eventually } from '../support/eventually.js';
import { assertAgentBuilt, connectDatabase, orphanedBrowsers, processTable, seededRandom, transientRows, workDirOf } from './support/accounting.js';
import { killWhenStateFileAppears } from './support/kill-points.js';
import { acquire, cdpAnswers, clearError, describeError, settle, tally, type PoolLease, type Seen } from './support/operations.js';

/**
 * kill -9 of the service in the middle of creates, deletes, pool acquires and releases and
 * a login flow, then a start on the same data dir. After each restart: nothing orphaned
 * (agent, Chromium, Xvfb, work dir or runtime record without a live session, or the other
 * way round), nothing from before the kill left starting, no lease lost or duplicated,
 * the pool back at its size, and every client saw a clear error or a success that holds.
 * The login flow running at the first kill fails within the liveness window, its browser
 * closes, and a new login succeeds.
 *
 * FAULT_ROUNDS repeats the whole sequence (make reliability); FAULT_SEED replays the
 * random kill moments of a failed run (the seed is printed).
 */

const ROUNDS = Number(process.env.FAULT_ROUNDS ?? 1);
const SEED = Number(process.env.FAULT_SEED ?? Math.floor(Math.random() * 2 ** 31));
const CREATES = Number(process.env.FAULT_CREATES ?? 8);
const POOL_SIZE = 3;
/** The flow sweep's window: engine/runner.ts STALE_AFTER_MS (30 s) and one HEARTBEAT_MS (5 s). */
const STALE_AND_BEAT_MS = 30_000 + 5_000;

type KillMoment = 'requests-sent' | 'chromium-launching' | 'creates-answering' | 'random';
const MOMENTS: KillMoment[] = ['requests-sent', 'chromium-launching', 'creates-answering', 'random'];
/** The random moment falls within this long after the burst. */
const RANDOM_WINDOW_MS = 6_000;

interface Cycle {
  creates: Array<{ name: string; seen: Seen<{ session_id: string }> }>;
  deletes: Array<{ id: string; seen: Seen<unknown> }>;
  acquires: Array<{ name: string; seen: Seen<PoolLease | undefined> }>;
  releases: Array<{ lease: PoolLease; seen: Seen<unknown> }>;
}

let sites: LoginSites;
const figures: Array<Record<string, unknown>> = [];

beforeAll(async () => {
  assertAgentBuilt();
  sites = await startLoginSites();
  console.log(`service-kill faults: seed ${SEED} (replay with FAULT_SEED=${SEED}), rounds ${ROUNDS}, creates per burst ${CREATES}`);
});
afterEach(cleanupServices);
afterAll(async () => {
  await sites?.close();
  console.log(`service-kill figures:\n${figures.map((f) => JSON.stringify(f)).join('\n')}`);
});

const SERVICE_ENV = { BROWSERPLANE_ORG_MAX_CONCURRENT_SESSIONS: '100' };

describe('the service killed with SIGKILL in the middle of operations', () => {
  for (let round = 1; round <= ROUNDS; round++) {
    it(`round ${round}: leaves nothing orphaned, stuck, lost or duplicated after each restart`, async () => {
      const random = seededRandom(SEED + round);
      let service = await startService({ env: SERVICE_ENV });
      const adminKey = service.adminKey;
      const servicePids = [service.pid];
      let kernel = service.client();

      const pool = await kernel.browserPools.create({ name: unique('faults'), size: POOL_SIZE, headless: true, fill_rate_per_minute: 1000, timeout_seconds: 300 });
      await eventually(async () => (await kernel.browserPools.retrieve(pool.id)).available_count === POOL_SIZE, { timeoutMs: 90_000, intervalMs: 50, what: 'the pool to fill' });
      // A login waiting for a person's input when the service dies.
      const connection = await kernel.auth.connections.create({
        domain: sites.domain('single'),
        profile_name: unique('faults-login'),
        login_url: sites.url('single', '/login'),
        health_checks: false,
        save_credentials: false,
      });
      await kernel.auth.connections.login(connection.id);
      await eventually(async () => (await kernel.auth.connections.retrieve(connection.id)).flow_step === 'AWAITING_INPUT', { timeoutMs: 90_000, intervalMs: 50, what: 'the login to ask for input' });
      const flowSessionId = await flowBrowser(service, connection.id);
      const firstKillAt = { at: 0 };
      /** How long no service ran (kill to listening), summed: the flow sweep cannot run then. */
      let downtimeMs = 0;

      let held: PoolLease[] = [];
      // Sessions for the first burst's deletes; later bursts delete what earlier ones made.
      let running = (await Promise.all([1, 2, 3].map(() => kernel.browsers.create({ headless: true, timeout_seconds: 600 })))).map((s) => s.session_id);
      for (const moment of MOMENTS) {
        // ---- the burst, and the kill -----------------------------------------------
        const cycle: Cycle = { creates: [], deletes: [], acquires: [], releases: [] };
        const pending: Array<Promise<unknown>> = [];
        const db = await connectDatabase(service);
        for (let i = 0; i < CREATES; i++) {
          const name = unique(`kill-${moment}`);
          pending.push(settle(kernel.browsers.create({ name, headless: true, timeout_seconds: 600 })).then((seen) => cycle.creates.push({ name, seen })));
        }
        for (const id of running.splice(0, 3)) pending.push(settle(kernel.browsers.deleteByID(id)).then((seen) => cycle.deletes.push({ id, seen })));
        for (const lease of held.splice(0)) pending.push(settle(kernel.browserPools.release(pool.id, { session_id: lease.sessionId })).then((seen) => cycle.releases.push({ lease, seen })));
        for (let i = 0; i < POOL_SIZE + 1; i++) {
          const name = unique('lease');
          pending.push(settle(acquire(kernel, pool.id, name, 5)).then((seen) => cycle.acquires.push({ name, seen })));
        }
        const delayMs = await killMoment(moment, { db, random, cycle });
        await db.end();
        firstKillAt.at ||= Date.now();
        const killedAt = Date.now();
        expect(await service.kill(), `the ${moment} kill`).toEqual({ code: null, signal: 'SIGKILL' });
        await Promise.all(pending);

        // ---- the restart ---------------------------------------------------------------
        const restartAt = new Date();
        service = await startService({ dataDir: service.dataDir, env: SERVICE_ENV });
        const recoveredMs = Date.now() - restartAt.getTime();
        servicePids.push(service.pid);
        kernel = service.client(adminKey);
        downtimeMs += Date.now() - killedAt;
        const report = service.logs().find((line) => line.msg === 'browser sessions reconciled at start-up');
        const check = await connectDatabase(service);
        try {
          if (moment === MOMENTS[0]) {
            // Within the liveness window the interrupted flow still counts as running: a new login is a clear 409.
            const again = await settle(kernel.auth.connections.login(connection.id));
            expect(again.ok ? 'ok' : clearError(again.error), 'a login while the interrupted flow is within its window').toBe('409 flow_in_progress');
          }
          expect(await transientRows(check, restartAt), 'rows left in a transient state').toEqual([]);
          const leaks = await settledAccounting(check, service, servicePids);
          expect(leaks, 'orphaned browsers after the restart').toEqual([]);

          ({ running } = await checkCreates(kernel, check, cycle));
          await checkDeletes(kernel, check, cycle);
          held = await checkLeases(kernel, check, pool.id, cycle);
          await eventually(async () => poolIsFull(check, pool.id), { timeoutMs: 90_000, intervalMs: 50, what: `pool ${pool.id} to refill to ${POOL_SIZE}` });
          expect(await settledAccounting(check, service, servicePids), 'orphaned browsers after the pool refilled').toEqual([]);
        } finally {
          await check.end();
        }
        figures.push({
          round,
          seed: SEED,
          moment,
          killAfterMs: delayMs,
          restartToListeningMs: recoveredMs,
          startupMs: startupPhases(service),
          reconciled: report && { adopted: report.adopted, ended: report.ended, orphans: report.orphans },
          clients: tally([
            ...cycle.creates.map((c) => ({ op: 'create', seen: c.seen })),
            ...cycle.deletes.map((c) => ({ op: 'delete', seen: c.seen })),
            ...cycle.acquires.map((c) => ({ op: 'acquire', seen: c.seen })),
            ...cycle.releases.map((c) => ({ op: 'release', seen: c.seen })),
          ]),
        });
      }

      // ---- the login flow that ran at the first kill ----------------------------------
      const db = await connectDatabase(service);
      try {
        const failed = await eventually(
          async () => {
            const { rows } = await db.query<{ status: string; error_code: string | null; finished_at: Date | null }>(
              'SELECT status, error_code, finished_at FROM auth_flows WHERE connection_id = $1 ORDER BY started_at LIMIT 1',
              [connection.id],
            );
            return rows[0]?.status === 'IN_PROGRESS' ? undefined : rows[0];
          },
          { timeoutMs: Math.max(1, firstKillAt.at + STALE_AND_BEAT_MS + downtimeMs + 15_000 - Date.now()), intervalMs: 50, what: 'the interrupted login flow to end' },
        );
        expect(failed, 'the interrupted login flow').toMatchObject({ status: 'FAILED', error_code: 'flow_interrupted' });
        const failedAfterMs = failed.finished_at!.getTime() - firstKillAt.at;
        figures.push({ round, interruptedFlowFailedAfterKillMs: failedAfterMs, serviceDownMs: downtimeMs });
        // 30 s of silence and the next 5 s beat of a running service (plus a little for a busy machine).
        expect(failedAfterMs, 'the interrupted flow failed within the liveness window').toBeLessThan(STALE_AND_BEAT_MS + downtimeMs + 5_000);
        if (flowSessionId) {
          await eventually(async () => (await db.query('SELECT 1 FROM browser_sessions WHERE id = $1 AND deleted_at IS NULL', [flowSessionId])).rowCount === 0, { timeoutMs: 30_000, intervalMs: 50, what: 'the flow’s browser to close' });
          expect((await processTable()).filter((p) => p.cmdline.includes(`${workDirOf(flowSessionId)}/`)), 'processes of the flow’s browser').toEqual([]);
        }
        await loginSucceeds(kernel, connection.id);
        expect(await settledAccounting(db, service, servicePids), 'orphaned browsers after the new login').toEqual([]);
      } finally {
        await db.end();
      }
    }, 300_000);
  }
});

describe('the service killed the instant a launch hands a browser to its agent', () => {
  // The record is written before the agent gets the browser (api/src/runtime/local-runtime.ts):
  // written after it, this kill left the agent and its Chromium running with no owner.
  it.each([
    { path: 'a claimed standby agent', standby: '1', file: /^bs_.*\.log$/ },
    { path: 'a freshly spawned agent', standby: '0', file: /^bs_.*\.log$/ },
  ])('through $path leaves no orphaned agent, Chromium or work dir', async ({ standby, file }) => {
    const env = { ...SERVICE_ENV, BROWSERPLANE_STANDBY_AGENTS: standby };
    const first = await startService({ env });
    const kernel = first.client();
    // A first browser, so the standby (when on) is started and ready for the next create.
    await kernel.browsers.create({ headless: true, timeout_seconds: 600 });
    if (standby === '1') await new Promise((resolve) => setTimeout(resolve, 2000));

    const create = settle(kernel.browsers.create({ headless: true, timeout_seconds: 600 }));
    const killedAt = await killWhenStateFileAppears(first, file);
    const seen = await create;
    expect(seen.ok || clearError(seen.error), `the cut-off create: ${seen.ok ? 'ok' : describeError(seen.error)}`).toBeTruthy();

    const second = await startService({ dataDir: first.dataDir, env });
    const db = await connectDatabase(second);
    try {
      expect(await transientRows(db, new Date()), `rows left in a transient state (killed at ${killedAt})`).toEqual([]);
      expect(await settledAccounting(db, second, [first.pid, second.pid]), `orphaned browsers (killed at ${killedAt})`).toEqual([]);
    } finally {
      await db.end();
    }
  });
});

/** Waits for the moment to kill; returns how long after the burst it came. */
async function killMoment(moment: KillMoment, { db, random, cycle }: { db: pg.Client; random: () => number; cycle: Cycle }): Promise<number> {
  const sent = Date.now();
  if (moment === 'requests-sent') await new Promise((resolve) => setTimeout(resolve, 30));
  else if (moment === 'creates-answering') {
    // Half the creates answered 200; the others still launch.
    await eventually(() => cycle.creates.filter((c) => c.seen.ok).length >= CREATES / 2, { timeoutMs: 60_000, intervalMs: 50, what: 'half the creates to answer' });
  } else if (moment === 'chromium-launching') {
    // Several creates admitted and their agents spawned (recorded), none of them ready yet.
    await eventually(
      async () => (await db.query(`SELECT 1 FROM browser_sessions WHERE phase = 'starting' AND deleted_at IS NULL AND pool_id IS NULL`)).rowCount! >= 3,
      { timeoutMs: 30_000, intervalMs: 50, what: 'creates to be launching' },
    );
  } else await new Promise((resolve) => setTimeout(resolve, Math.floor(random() * RANDOM_WINDOW_MS)));
  return Date.now() - sent;
}

/** When each start-up step finished, in ms after the service's first log line. */
function startupPhases(service: RunningService): Record<string, number> {
  const logs = service.logs();
  const time = (line: LogLine | undefined) => Date.parse(String(line?.time));
  const at = (msg: string) => time(logs.find((l) => l.msg === msg)) - time(logs[0]);
  return {
    postgresReady: at('embedded Postgres ready'),
    migrated: at('schema up to date'),
    reconciled: at('browser sessions reconciled at start-up'),
    listening: at('browserplane listening'),
  };
}

/** The accounting, retried for a few seconds: a killed service's standby agent needs a moment to notice and exit. */
async function settledAccounting(db: pg.Client, service: RunningService, servicePids: number[]): Promise<string[]> {
  const input = { db, dataDir: service.dataDir, servicePids, currentPid: service.pid };
  let problems = await orphanedBrowsers(input);
  for (let i = 0; i < 20 && problems.length > 0; i++) {
    await new Promise((resolve) => setTimeout(resolve, 500));
    problems = await orphanedBrowsers(input);
  }
  return problems;
}

interface SessionState {
  id: string;
  deleted_at: Date | null;
  deleted_reason: string | null;
}

async function sessionByName(db: pg.Client, name: string): Promise<SessionState[]> {
  const { rows } = await db.query<SessionState>('SELECT id, deleted_at, deleted_reason FROM browser_sessions WHERE name = $1', [name]);
  return rows;
}

/** A create's 200 is true afterwards (a live, working browser, or one ended with a reason); an error was clear. */
async function checkCreates(kernel: Kernel, db: pg.Client, cycle: Cycle): Promise<{ running: string[] }> {
  const running: string[] = [];
  for (const { name, seen } of cycle.creates) {
    const rows = await sessionByName(db, name);
    expect(rows.length, `create ${name}: sessions made`).toBeLessThanOrEqual(1);
    if (seen.ok) expect(rows[0]?.id, `create ${name} answered 200: its session exists`).toBe(seen.value.session_id);
    else expect(clearError(seen.error), `create ${name}: ${describeError(seen.error)}`).toBeDefined();
    const row = rows[0];
    if (!row) continue;
    if (row.deleted_at === null) {
      const session = await kernel.browsers.retrieve(row.id);
      expect(await cdpAnswers(session.cdp_ws_url), `create ${name}: session ${row.id} is live, so its browser answers over CDP`).toBe(true);
      running.push(row.id);
    } else expect(row.deleted_reason, `create ${name}: ended session ${row.id} has a reason`).toEqual(expect.any(String));
  }
  return { running };
}

/** A delete's 204 ended the session; an errored delete is clear, and a retry ends it (or finds it ended). */
async function checkDeletes(kernel: Kernel, db: pg.Client, cycle: Cycle): Promise<void> {
  for (const { id, seen } of cycle.deletes) {
    if (!seen.ok) {
      expect(clearError(seen.error), `delete ${id}: ${describeError(seen.error)}`).toBeDefined();
      const retry = await settle(kernel.browsers.deleteByID(id));
      if (!retry.ok) expect(clearError(retry.error), `delete ${id} retried: ${describeError(retry.error)}`).toMatch(/^404 /);
    }
    const { rows } = await db.query<SessionState>('SELECT id, deleted_at, deleted_reason FROM browser_sessions WHERE id = $1', [id]);
    expect(rows[0]?.deleted_at, `deleted session ${id} is ended`).not.toBeNull();
  }
}

/**
 * Leases after the restart: every acquire that got a browser (and was not released) still
 * holds it; no browser went to two clients; a lease nobody heard of is one whose acquire
 * or release the kill cut off (the client saw an error), and is handed back here as such a
 * client would (release by its name's session). Returns the leases still held.
 */
async function checkLeases(kernel: Kernel, db: pg.Client, poolId: string, cycle: Cycle): Promise<PoolLease[]> {
  const held = cycle.acquires.flatMap((a) => (a.seen.ok && a.seen.value ? [a.seen.value] : []));
  const ids = held.map((l) => l.sessionId);
  expect(new Set(ids).size, `no browser leased to two clients: ${ids.join(', ')}`).toBe(ids.length);
  for (const a of cycle.acquires) if (!a.seen.ok) expect(clearError(a.seen.error), `acquire ${a.name}: ${describeError(a.seen.error)}`).toBeDefined();
  for (const r of cycle.releases) if (!r.seen.ok) expect(clearError(r.seen.error), `release ${r.lease.sessionId}: ${describeError(r.seen.error)}`).toBeDefined();

  const { rows: leased } = await db.query<{ id: string; name: string | null }>(
    'SELECT id, name FROM browser_sessions WHERE pool_id = $1 AND deleted_at IS NULL AND leased_at IS NOT NULL',
    [poolId],
  );
  const leasedIds = new Set(leased.map((r) => r.id));
  // By lease name: a browser released with 204 may since have been leased again, under another name.
  const releasedOk = new Set(cycle.releases.filter((r) => r.seen.ok).map((r) => r.lease.name));
  for (const lease of held) {
    const { rows } = await db.query<SessionState>('SELECT id, deleted_at, deleted_reason FROM browser_sessions WHERE id = $1', [lease.sessionId]);
    // A held browser may have ended since (its agent died with the kill window): then with a reason, never silently.
    if (rows[0]?.deleted_at) expect(rows[0].deleted_reason, `lease ${lease.name}: ended with a reason`).toEqual(expect.any(String));
    else expect(leasedIds.has(lease.sessionId), `lease ${lease.name} (session ${lease.sessionId}) answered 200 and is still leased`).toBe(true);
  }
  const uncertain = new Set([
    ...cycle.acquires.filter((a) => !a.seen.ok).map((a) => a.name),
    ...cycle.releases.filter((r) => !r.seen.ok).map((r) => r.lease.name),
  ]);
  const explained = new Set(held.map((l) => l.sessionId));
  const orphanLeases = leased.filter((r) => !explained.has(r.id));
  for (const row of orphanLeases) {
    expect(row.name !== null && releasedOk.has(row.name), `lease ${row.name} (session ${row.id}) was released (204) but is still leased`).toBe(false);
    expect(row.name !== null && uncertain.has(row.name), `leased session ${row.id} (${row.name}) belongs to no client that saw an error`).toBe(true);
    // Such a client retries its release (or the lease's idle timeout ends it): it goes back.
    const retry = await settle(kernel.browserPools.release(poolId, { session_id: row.id }));
    expect(retry.ok, `release of cut-off lease ${row.id}: ${retry.ok ? '' : describeError(retry.error)}`).toBe(true);
  }
  return held.filter((l) => leasedIds.has(l.sessionId));
}

async function poolIsFull(db: pg.Client, poolId: string): Promise<boolean> {
  const { rows } = await db.query<{ total: number; starting: number }>(
    `SELECT count(*)::int AS total, (count(*) FILTER (WHERE phase = 'starting'))::int AS starting
       FROM browser_sessions WHERE pool_id = $1 AND deleted_at IS NULL`,
    [poolId],
  );
  return rows[0]!.total === POOL_SIZE && rows[0]!.starting === 0;
}

/** The flow's browser session, from the flow row. */
async function flowBrowser(service: RunningService, connectionId: string): Promise<string | undefined> {
  const db = await connectDatabase(service);
  try {
    const { rows } = await db.query<{ browser_session_id: string | null }>('SELECT browser_session_id FROM auth_flows WHERE connection_id = $1', [connectionId]);
    return rows[0]?.browser_session_id ?? undefined;
  } finally {
    await db.end();
  }
}

/** A new login on the connection runs to SUCCESS, answered as a person would. */
async function loginSucceeds(kernel: Kernel, connectionId: string): Promise<void> {
  await kernel.auth.connections.login(connectionId);
  let last: string | undefined;
  for await (const event of await kernel.auth.connections.follow(connectionId)) {
    if (event.event !== 'managed_auth_state') continue;
    last = event.flow_status;
    if (event.flow_step === 'AWAITING_INPUT' && event.fields) {
      const values = Object.fromEntries(event.fields.map((f) => [f.id, f.type === 'password' ? PASSWORD : USERNAME]));
      await kernel.auth.connections.submit(connectionId, { field_values: values });
    }
  }
  expect(last, 'the new login after the restarts').toBe('SUCCESS');
}
