import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../api/src/clock.js';
import type { HttpClient } from '../support/http.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { newProject } from './browsers.fixtures.js';
import { ProcessCalls } from './browser-process.fixtures.js';
import { allEvents, eventuallyEvents, ofType } from './browser-telemetry.fixtures.js';

/**
 * Each embedded browser's memory limit (one memory cgroup for its agent, Chromium and the
 * session's processes) and the system_oom_kill telemetry of a kill inside it: real agents,
 * real Chromium, real cgroups and the kernel's real OOM killer, real Postgres. A session's
 * process eats memory past the limit; the kernel kills it inside the browser's cgroup, the
 * browser goes on, and only that session hears of it. Needs root and a memory cgroup
 * controller (CI's hosts have both); where there is none the service runs browsers with no
 * limit, and this file says so and checks nothing.
 */

const LIMIT_MB = 700;
const haveCgroups = process.getuid?.() === 0 && readFileSync('/proc/self/cgroup', 'utf8').split('\n').some((line) => line.split(':')[1]?.split(',').includes('memory'));

let app: TestApp;
let client: HttpClient;
const sessions: string[] = [];

async function create(): Promise<string> {
  const res = await client.post('/browsers', { headless: true, telemetry: { enabled: true } });
  expect(res.status, res.text).toBe(200);
  sessions.push(res.body.session_id as string);
  return res.body.session_id as string;
}

/** The memory cgroup directory a process is in. */
function memoryCgroupOf(pid: number): string {
  const line = readFileSync(`/proc/${pid}/cgroup`, 'utf8').split('\n').find((l) => l.split(':')[1]?.split(',').includes('memory'))!;
  return path.join('/sys/fs/cgroup/memory', line.split(':').slice(2).join(':'));
}

beforeAll(async () => {
  if (!haveCgroups) return;
  app = await startTestApp({ clock: systemClock, memoryLimitMb: LIMIT_MB });
  ({ http: client } = await newProject(app.tenant.http));
}, 60_000);
afterAll(async () => {
  for (const id of sessions) await client.delete(`/browsers/${id}`).catch(() => undefined);
  await app?.close();
});

describe.skipIf(!haveCgroups)('a browser\'s memory limit', () => {
  let victim: string;
  let bystander: string;
  let cgroupDir: string;

  beforeAll(async () => {
    [victim, bystander] = await Promise.all([create(), create()]);
  }, 60_000);

  it('puts the browser\'s processes in a cgroup of its own, with the limit', async () => {
    // The service's own memory cgroup (this test runs it in process), then browserplane/<id>.
    cgroupDir = path.join(memoryCgroupOf(process.pid), 'browserplane', victim);
    expect(Number(readFileSync(path.join(cgroupDir, 'memory.limit_in_bytes'), 'utf8'))).toBe(LIMIT_MB * 1024 * 1024);
    const comms = (pid: string) => readFileSync(path.join(memoryCgroupOf(process.pid), 'browserplane', pid, 'cgroup.procs'), 'utf8').trim().split('\n').map((p) => readFileSync(`/proc/${p}/comm`, 'utf8').trim());
    expect(comms(victim)).toContain('node'); // the agent
    expect(comms(victim).some((c) => c.startsWith('chrom'))).toBe(true);
    // The other browser is in a cgroup of its own.
    expect(comms(bystander).some((c) => c.startsWith('chrom'))).toBe(true);
    // A session's process too, though its sandbox shows it a cgroup namespace of its own ("/").
    const { stdout } = await new ProcessCalls(client, victim).sh('cat /proc/self/cgroup; echo; grep -c . /proc/self/cgroup');
    expect(stdout).toContain(':memory:/\n');
  });

  it('OOM-kills a process that eats past the limit inside the browser, which goes on', async () => {
    // tail holds a line with no newline in memory, as it grows.
    const result = await new ProcessCalls(client, victim).sh(`head -c ${LIMIT_MB * 2}M /dev/zero | tail; echo "tail ended: $?"`, { timeout_sec: 120 });
    expect(result.stdout).toContain('tail ended: 137');
    const events = await eventuallyEvents(client, victim, (all) => expect(ofType(all, 'system_oom_kill').length).toBeGreaterThan(0));
    const [kill] = ofType(events, 'system_oom_kill');
    expect(kill!.event).toMatchObject({ category: 'system', source: { kind: 'local_process', event: 'oom_kill' } });
    expect(kill!.event.data).toMatchObject({ process_name: 'tail', constraint: 'memcg' });
    // The allocation that hit the limit may be tail's or the pipe's, written by head.
    expect(['tail', 'head']).toContain(kill!.event.data!.trigger_process_name);
    expect(kill!.event.data!.rss_kb).toBeGreaterThan(100 * 1024);
    expect(kill!.event.data!.rss_kb).toBeLessThanOrEqual(LIMIT_MB * 1024);
    expect(kill!.event.data!.top_tasks[0]).toMatchObject({ name: 'tail' });
    // The browser survived it: its processes still answer.
    expect((await new ProcessCalls(client, victim).sh('echo alive')).stdout).toBe('alive\n');
    expect((await client.get(`/browsers/${victim}`)).status).toBe(200);
  }, 180_000);

  it('tells no other session of it', async () => {
    // The bystander's agent polls its own counter every second: a few seconds is many looks.
    await new Promise((resolve) => setTimeout(resolve, 3000));
    expect(ofType(await allEvents(client, bystander), 'system_oom_kill')).toEqual([]);
  });

  it('removes the cgroup with the browser', async () => {
    expect(existsSync(cgroupDir)).toBe(true);
    expect((await client.delete(`/browsers/${victim}`)).status).toBe(204);
    expect(existsSync(cgroupDir)).toBe(false);
  });
});
