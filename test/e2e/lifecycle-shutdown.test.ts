import { existsSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { rawConversation } from './support/raw-http.js';
import { unique } from './support/sdk.js';
import { cleanupServices, LISTENING_MSG, postgresPids, startService, type RunningService } from '../support/service.js';
import { eventually } from '../support/eventually.js';
import { processesMentioning } from './support/processes.js';

const messages = (service: RunningService) => service.logs().map((line) => line.msg);
const LEFTOVER_WARNING = 'stopping a Postgres server left running by an earlier run';

afterEach(cleanupServices);

/** The shutdown log lines came in order and Postgres for the data dir is gone. */
function expectCleanStop(service: RunningService, signal: NodeJS.Signals) {
  const logs = service.logs();
  const draining = logs.findIndex((line) => line.msg === 'shutting down: draining requests');
  const stopped = logs.findIndex((line) => line.msg === 'stopped');
  expect(draining, 'draining line').toBeGreaterThanOrEqual(0);
  expect(logs[draining]).toMatchObject({ reason: signal });
  expect(stopped, '"stopped" after "shutting down"').toBeGreaterThan(draining);
  expect(postgresPids(service.dataDir)).toEqual([]);
  expect(existsSync(path.join(service.dataDir, 'postgres', 'postmaster.pid'))).toBe(false);
}

/** Holds a request in flight: its head is in and confirmed, its body not sent yet. */
async function requestInFlight(service: RunningService, body: string) {
  const conversation = rawConversation(service.url);
  conversation.sendHead('POST', '/org/projects', { Authorization: `Bearer ${service.adminKey}` }, Buffer.byteLength(body));
  await eventually(conversation.continued, { timeoutMs: 10_000, intervalMs: 50, what: '100 Continue' });
  return conversation;
}

describe('graceful shutdown', () => {
  it.each(['SIGTERM', 'SIGINT'] as const)('on %s drains, stops its Postgres, exits 0, and the next start works', async (signal) => {
    const service = await startService();
    expect(postgresPids(service.dataDir)).not.toHaveLength(0);

    const exit = await service.stop(signal);

    expect(exit).toEqual({ code: 0, signal: null });
    expectCleanStop(service, signal);
    const next = await startService({ dataDir: service.dataDir });
    expect(messages(next)).not.toContain(LEFTOVER_WARNING);
    await expect(next.client(service.adminKey).organization.limits.retrieve()).resolves.toBeDefined();
  });

  it('handles a SIGTERM sent the moment the listening line appears', async () => {
    const service = await startService({ waitForListening: false });
    await service.waitForLog((line) => line.msg === LISTENING_MSG);
    process.kill(service.pid, 'SIGTERM');

    expect(await service.exited).toEqual({ code: 0, signal: null });
    expectCleanStop(service, 'SIGTERM');
  });

  it('on a SIGTERM during start-up finishes starting, then stops cleanly', async () => {
    const service = await startService({ waitForListening: false });
    await service.waitForLog((line) => line.msg === 'initialising a new Postgres cluster');
    process.kill(service.pid, 'SIGTERM');

    expect(await service.exited).toEqual({ code: 0, signal: null });
    expect(messages(service)).toContain('signal during start-up: stopping once started');
    expectCleanStop(service, 'SIGTERM');
  });

  it('lets a request in flight at SIGTERM finish, refuses new connections, then exits 0', async () => {
    const service = await startService();
    const name = unique('drained');
    const body = JSON.stringify({ name });
    const held = await requestInFlight(service, body);

    process.kill(service.pid, 'SIGTERM');
    await service.waitForLog((line) => line.msg === 'shutting down: draining requests', 10_000);
    // Recordings and profiles are handed over through the listener first; then it closes.
    await service.waitForLog((line) => line.msg === 'shutting down: listener closed, waiting for requests in flight', 10_000);
    await expect(fetch(`${service.url}/healthz`)).rejects.toThrow();
    expect(postgresPids(service.dataDir)).not.toHaveLength(0); // the database outlives the drain

    held.socket.write(body);
    const response = await eventually(held.response, { timeoutMs: 10_000, intervalMs: 50, what: 'the response' });
    expect(response.status).toBe(200);
    expect(JSON.parse(response.body)).toMatchObject({ name, status: 'active' });
    held.socket.destroy();

    expect(await service.exited).toEqual({ code: 0, signal: null });
    expectCleanStop(service, 'SIGTERM');
    const next = await startService({ dataDir: service.dataDir });
    await expect(next.client(service.adminKey).projects.retrieve(name)).resolves.toMatchObject({ name });
  });

  it('cuts requests still open at BROWSERPLANE_SHUTDOWN_TIMEOUT_MS and exits 0', async () => {
    const service = await startService({ env: { BROWSERPLANE_SHUTDOWN_TIMEOUT_MS: '300' } });
    const held = await requestInFlight(service, JSON.stringify({ name: unique('never-sent') }));

    const exit = await service.stop('SIGTERM');

    expect(exit).toEqual({ code: 0, signal: null });
    expect(service.logs().find((line) => line.msg === 'requests still open at the shutdown deadline; closing them')).toMatchObject({
      level: 'warn',
      timeoutMs: 300,
    });
    await eventually(held.closed, { timeoutMs: 5_000, intervalMs: 50, what: 'the held connection to close' });
    expectCleanStop(service, 'SIGTERM');
  });

  it('ends open event streams with server_shutting_down instead of waiting for the deadline', async () => {
    // A deadline far beyond the test's own timeout: only the shutdown signal can end the stream in time.
    const service = await startService({ env: { BROWSERPLANE_SHUTDOWN_TIMEOUT_MS: '600000' } });
    const kernel = service.client();
    const invocation = await kernel.invocations.create({ app_name: 'a', action_name: 'b', version: '1', async: true });
    const stream = await kernel.invocations.follow(invocation.id);
    const frames: Array<{ event: string; error?: { code: string } }> = [];
    const reading = (async () => {
      for await (const frame of stream) frames.push(frame);
    })();
    await eventually(() => frames.length > 0, { timeoutMs: 10_000, intervalMs: 50, what: 'the first state frame' });

    const exit = await service.stop('SIGTERM');
    await reading;

    expect(exit).toEqual({ code: 0, signal: null });
    expect(frames[0]).toMatchObject({ event: 'invocation_state' });
    expect(frames.at(-1)).toMatchObject({ event: 'error', error: { code: 'server_shutting_down' } });
    expect(service.logs().some((line) => line.msg === 'requests still open at the shutdown deadline; closing them')).toBe(false);
    expectCleanStop(service, 'SIGTERM');
  });

  it('on a second signal during the drain cuts the open request but still stops Postgres and exits 0', async () => {
    const service = await startService();
    const held = await requestInFlight(service, JSON.stringify({ name: unique('cut') }));
    const cut = new Promise<void>((resolve) => held.socket.once('close', () => resolve()));
    process.kill(service.pid, 'SIGTERM');
    await service.waitForLog((line) => line.msg === 'shutting down: listener closed, waiting for requests in flight', 10_000);

    process.kill(service.pid, 'SIGINT');

    await cut;
    expect(await service.exited).toEqual({ code: 0, signal: null });
    expect(service.logs().find((line) => line.msg.startsWith('second signal during shutdown'))).toMatchObject({ signal: 'SIGINT', level: 'warn' });
    expect(messages(service)).toContain('requests still open at a second signal; closing them');
    expectCleanStop(service, 'SIGTERM');
  });

  it('on a third signal exits 1 at once; the next start recovers', async () => {
    const service = await startService();
    const held = await requestInFlight(service, JSON.stringify({ name: unique('abandoned') }));
    process.kill(service.pid, 'SIGTERM');
    await service.waitForLog((line) => line.msg === 'shutting down: draining requests', 10_000);

    process.kill(service.pid, 'SIGINT');
    await service.waitForLog((line) => line.msg.startsWith('second signal during shutdown'), 10_000);
    process.kill(service.pid, 'SIGTERM');

    expect(await service.exited).toEqual({ code: 1, signal: null });
    expect(service.logs().find((line) => line.msg.startsWith('third signal during shutdown: exiting now'))).toMatchObject({ signal: 'SIGTERM' });
    held.socket.destroy();
    const next = await startService({ dataDir: service.dataDir });
    await expect(next.client(service.adminKey).organization.limits.retrieve()).resolves.toBeDefined();
  });
});

describe('graceful shutdown with browsers running', () => {
  it('closes every browser: no agent, Chromium or Xvfb process and no work dir is left', async () => {
    const service = await startService();
    const kernel = service.client();
    const sessions = await Promise.all([kernel.browsers.create({ headless: false }), kernel.browsers.create({ headless: true })]);
    const records = await Promise.all(
      sessions.map(async (s) => JSON.parse(await readFile(path.join(service.dataDir, 'browsers', `${s.session_id}.json`), 'utf8')) as { agentPid: number; workDir: string }),
    );
    for (const record of records) expect(await processesMentioning(record.workDir)).not.toEqual([]);

    expect(await service.stop('SIGTERM')).toEqual({ code: 0, signal: null });

    for (const record of records) {
      expect(existsSync(`/proc/${record.agentPid}`), 'agent process').toBe(false);
      expect(await processesMentioning(record.workDir), 'processes of the browser').toEqual([]);
      expect(existsSync(record.workDir), 'work dir').toBe(false);
    }
    expect((await readdir(path.join(service.dataDir, 'browsers'))).filter((f) => f.endsWith('.json'))).toEqual([]);
    expectCleanStop(service, 'SIGTERM');
  });
});

describe('after SIGKILL', () => {
  it('Postgres is left running, and the next start stops that server and starts cleanly', async () => {
    const first = await startService();
    const project = await first.client().projects.create({ name: unique('before-kill') });

    expect(await first.kill()).toEqual({ code: null, signal: 'SIGKILL' });
    const leftover = postgresPids(first.dataDir);
    expect(leftover).not.toHaveLength(0);

    const second = await startService({ dataDir: first.dataDir });
    expect(second.logs().find((line) => line.msg === LEFTOVER_WARNING)).toMatchObject({ level: 'warn' });
    expect(postgresPids(first.dataDir).filter((pid) => leftover.includes(pid))).toEqual([]);
    await expect(second.client(first.adminKey).projects.retrieve(project.id)).resolves.toMatchObject({ name: project.name });

    expect((await second.stop()).code).toBe(0);
    expectCleanStop(second, 'SIGTERM');
  });

  it('of the service and its Postgres both (a crash), the next start recovers the data', async () => {
    const first = await startService();
    const project = await first.client().projects.create({ name: unique('before-crash') });
    const [postmaster] = postgresPids(first.dataDir);
    expect(postmaster).toBeDefined();

    await first.kill();
    process.kill(postmaster!, 'SIGKILL');
    await eventually(() => postgresPids(first.dataDir).length === 0, { timeoutMs: 10_000, intervalMs: 50, what: 'the postmaster to die' });

    const second = await startService({ dataDir: first.dataDir });
    await expect(second.client(first.adminKey).projects.retrieve(project.id)).resolves.toMatchObject({ name: project.name });
    expect((await second.stop()).code).toBe(0);
    expectCleanStop(second, 'SIGTERM');
  });
});
