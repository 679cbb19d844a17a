import { appendFile, readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterEach, describe, expect, it, onTestFailed } from 'vitest';
import { unique } from '../e2e/support/sdk.js';
import { cleanupServices, postgresPids, startService, type RunningService } from '../support/service.js';
import { eventually } from '../support/eventually.js';

/**
 * The embedded Postgres of a running service (the built one, started as a user starts
 * it, no DATABASE_URL) dies under it. SIGKILL on the postmaster: it comes back by itself,
 * /readyz says it is restarting meanwhile and 200 after, /healthz never fails, keys and
 * data from before the kill work. A Postgres that cannot start again (its configuration
 * broken): /readyz says each attempt fails, and once the restart budget is spent (small
 * here) /readyz and /healthz both answer database_failed so a process supervisor
 * restarts the service.
 */

afterEach(cleanupServices);

interface Sample {
  at: number;
  route: string;
  status: number | 'network';
  retryAfter?: string | null;
  body?: { code?: string; message?: string; database?: Record<string, unknown>; [key: string]: unknown };
}

async function get(service: RunningService, route: string, key?: string): Promise<Sample> {
  const at = Date.now();
  try {
    const res = await fetch(`${service.url}${route}`, {
      headers: key ? { authorization: `Bearer ${key}` } : {},
      signal: AbortSignal.timeout(10_000),
    });
    const text = await res.text();
    return { at, route, status: res.status, retryAfter: res.headers.get('retry-after'), body: text ? (JSON.parse(text) as Sample['body']) : {} };
  } catch {
    return { at, route, status: 'network' };
  }
}

/** /healthz, /readyz and a keyed read every 100 ms until stopped. */
function watch(service: RunningService, key: string): { samples: Sample[]; stop(): Promise<void> } {
  const samples: Sample[] = [];
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      samples.push(...(await Promise.all([get(service, '/healthz'), get(service, '/readyz'), get(service, '/profiles', key)])));
      await new Promise((resolve) => setTimeout(resolve, 100));
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

/** The running postmaster's pid, from its lock file (the only process of the cluster with the data dir on its command line). */
async function postmasterPid(service: RunningService): Promise<number> {
  const pids = postgresPids(service.dataDir);
  expect(pids, 'one postmaster for the data dir').toHaveLength(1);
  const lockPid = Number((await readFile(path.join(service.dataDir, 'postgres', 'postmaster.pid'), 'utf8')).split('\n')[0]);
  expect(lockPid).toBe(pids[0]);
  return lockPid;
}

function dumpOnFailure(service: RunningService): void {
  onTestFailed(() => {
    const lines = service.logs().filter((line) => line.level !== 'info' || String(line.component) === 'postgres');
    console.log(`${lines.slice(-30).map((l) => JSON.stringify(l).slice(0, 800)).join('\n')}\n${service.stderr.slice(-20).join('\n')}`);
  });
}

const byRoute = (samples: Sample[], route: string) => samples.filter((s) => s.route === route);

/** Every failed keyed read meanwhile is the outage's clear error with Retry-After. */
function expectOutageErrors(samples: Sample[]): void {
  for (const s of byRoute(samples, '/profiles').filter((x) => x.status !== 200)) {
    expect(`${s.status} ${s.body?.code}`, JSON.stringify(s)).toBe('503 database_unavailable');
    expect(s.retryAfter, JSON.stringify(s)).toMatch(/^\d+$/);
  }
}

describe('the embedded Postgres dies under a running service', () => {
  it('SIGKILL on the postmaster: Postgres comes back by itself, /readyz reports the restart, keys and data survive', async () => {
    const service = await startService({ env: { BROWSERPLANE_STANDBY_AGENTS: '0' } });
    dumpOnFailure(service);
    const admin = service.client();
    const key = (await admin.apiKeys.create({ name: unique('before-kill') })).key;
    const profile = await admin.profiles.create({ name: unique('before-kill') });
    const oldPid = await postmasterPid(service);
    const probes = watch(service, key);
    await new Promise((resolve) => setTimeout(resolve, 300));

    const killedAt = Date.now();
    process.kill(oldPid, 'SIGKILL');
    const ready = await eventually<Sample>(
      async () => {
        const readyz = await get(service, '/readyz');
        return readyz.status === 200 && readyz.at > killedAt + 200 ? readyz : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 50, what: '/readyz to answer 200 again after the kill' },
    );
    await probes.stop();
    const after = probes.samples.filter((s) => s.at >= killedAt);
    const readyz = byRoute(after, '/readyz');
    const restarting = readyz.filter((s) => s.body?.code === 'database_restarting');
    console.log(
      JSON.stringify({
        readyAgainMs: ready.at - killedAt,
        readyzSeen: [...new Set(readyz.map((s) => `${s.status} ${String(s.body?.code ?? s.body?.status)}`))],
        restartingFirstLast: [restarting[0], restarting.at(-1)].map((s) => s && { ms: s.at - killedAt, ...s.body?.database }),
        postgresLog: service
          .logs()
          .filter((l) => l.component === 'postgres' && Date.parse(String(l.time)) >= killedAt)
          .map((l) => `${Date.parse(String(l.time)) - killedAt}ms ${l.msg}`),
        keyedReadsFailed: byRoute(after, '/profiles').filter((s) => s.status !== 200).length,
        keyedReads: byRoute(after, '/profiles').length,
      }),
    );

    // Meanwhile: /readyz said what was happening, /healthz stayed up, reads failed clearly.
    expect(restarting.length, 'a /readyz sample while Postgres restarted').toBeGreaterThan(0);
    for (const s of restarting) {
      expect(s.status).toBe(503);
      expect(s.retryAfter).toMatch(/^\d+$/);
      expect(s.body).toMatchObject({ message: expect.stringContaining('restarting'), details: [], database: { state: 'restarting' } });
    }
    for (const s of restarting.filter((x) => x.body?.database?.attempt === 1)) {
      expect(s.body).toMatchObject({
        database: {
          state: 'restarting',
          attempt: 1,
          next_attempt_in_ms: expect.any(Number),
          reason: expect.stringContaining('SIGKILL'),
          failures_in_window: 1,
          failure_limit: 10,
          window_seconds: 300,
        },
      });
    }
    for (const s of byRoute(after, '/healthz')) expect(s.status, JSON.stringify(s)).toBe(200);
    expectOutageErrors(after);
    const exited = service.logs().find((l) => l.msg === 'embedded Postgres exited unexpectedly; restarting it');
    expect(exited).toMatchObject({ level: 'warn', attempt: 1, reason: expect.stringContaining(`pid ${oldPid}`) });
    expect(service.logs().find((l) => l.msg === 'embedded Postgres restarted')).toMatchObject({ level: 'warn', attempt: 1 });

    // It started over the dead server's lock file and ran crash recovery.
    const serverLog = await readFile(path.join(service.dataDir, 'postgres', 'server.log'), 'utf8');
    expect(serverLog).toMatch(/database system was interrupted|not properly shut down; automatic recovery in progress/);

    // After: a new postmaster, alone; the key made before the kill works; the data is there.
    const newPid = await postmasterPid(service);
    expect(newPid).not.toBe(oldPid);
    const keyed = service.client(key);
    expect((await keyed.profiles.retrieve(profile.id)).name).toBe(profile.name);
    await expect(keyed.profiles.create({ name: unique('after-restart') })).resolves.toMatchObject({ id: expect.any(String) });
    expect(await get(service, '/readyz')).toMatchObject({ status: 200, body: { status: 'ready' } });

    // A clean stop stops that Postgres and restarts nothing.
    const logged = service.logs().length;
    expect((await service.stop()).code).toBe(0);
    expect(postgresPids(service.dataDir)).toEqual([]);
    expect(service.logs().slice(logged).filter((l) => /restart/.test(l.msg))).toEqual([]);
  });

  it('a Postgres that cannot start again: /readyz says so, and /healthz fails once the restart budget is spent', async () => {
    const service = await startService({
      env: { BROWSERPLANE_STANDBY_AGENTS: '0', BROWSERPLANE_POSTGRES_RESTART_LIMIT: '3', BROWSERPLANE_POSTGRES_RESTART_WINDOW_SECONDS: '120' },
    });
    dumpOnFailure(service);
    const pid = await postmasterPid(service);
    const probes = watch(service, service.adminKey);
    // Postgres refuses to start with a setting it does not know.
    await appendFile(path.join(service.dataDir, 'postgres', 'postgresql.conf'), '\nbrowserplane_fault_test = on\n');

    const killedAt = Date.now();
    process.kill(pid, 'SIGKILL');
    const failedHealth = await eventually<Sample>(
      async () => {
        const healthz = await get(service, '/healthz');
        return healthz.status !== 200 ? healthz : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 50, what: '/healthz to fail' },
    );
    await new Promise((resolve) => setTimeout(resolve, 300));
    await probes.stop();
    const after = probes.samples.filter((s) => s.at >= killedAt);
    const readyz = byRoute(after, '/readyz');
    const gaveUpAt = Date.parse(String(failedHealth.body?.database?.failed_at));
    console.log(
      JSON.stringify({
        gaveUpAfterMs: gaveUpAt - killedAt,
        readyzSeen: readyz.map((s) => `${s.at - killedAt}ms ${s.status} ${s.body?.code} attempt=${String(s.body?.database?.attempt)}`).filter((_, i, all) => i === 0 || i === all.length - 1 || i % 5 === 0),
        healthz: failedHealth.body,
      }),
    );

    // /healthz: 200 while restarts were tried, then 503 database_failed.
    expect(failedHealth).toMatchObject({
      status: 503,
      body: {
        code: 'database_failed',
        message: expect.any(String),
        details: [],
        database: { state: 'failed', reason: expect.stringContaining('browserplane_fault_test'), failures_in_window: 3, failure_limit: 3, window_seconds: 120 },
      },
    });
    for (const s of byRoute(after, '/healthz').filter((x) => x.at < gaveUpAt)) expect(s.status, JSON.stringify(s)).toBe(200);
    // /readyz: restarting with the attempt and what went wrong, then failed.
    const restarting = readyz.filter((s) => s.body?.code === 'database_restarting');
    expect(restarting.length).toBeGreaterThan(0);
    expect(new Set(restarting.map((s) => s.body?.database?.attempt))).toContain(2);
    expect(restarting.find((s) => s.body?.database?.attempt === 2)?.body?.database?.reason).toMatch(/^restart attempt 1 failed: .*browserplane_fault_test/s);
    expect(await get(service, '/readyz')).toMatchObject({ status: 503, body: { code: 'database_failed', database: { state: 'failed' } } });
    for (const s of readyz) expect(s.status, JSON.stringify(s)).toBe(503);
    expectOutageErrors(after);
    const logs = service.logs();
    expect(logs.filter((l) => l.msg === 'embedded Postgres restart failed; restarting it').map((l) => [l.level, l.failed_attempt, l.attempt])).toEqual([
      ['warn', 1, 2],
    ]);
    expect(logs.find((l) => l.level === 'error' && String(l.msg).includes('giving up'))).toMatchObject({ attempts: 2, failures_in_window: 3 });

    // Nothing is left trying: no postmaster, and the service still stops cleanly.
    expect(postgresPids(service.dataDir)).toEqual([]);
    expect((await service.stop()).code).toBe(0);
  });
});
