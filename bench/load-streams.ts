/**
 * Many Server-Sent Events streams held at once: N clients follow one invocation
 * (GET /invocations/{id}/events), each on its own socket as separate clients would, and
 * hold. Measured: the time until every stream has its first frame, heartbeats per stream,
 * the service's memory, open files and CPU before, during and after, and how long a
 * published change takes to reach every stream (PATCH running, then PATCH succeeded,
 * which also makes the server close them all).
 */
import http from 'node:http';
import os from 'node:os';
import { callJson, mib, processStats, quantile, type ProcessStats } from './load-support.js';

const FRAME_TIMEOUT_MS = 120_000;
const SAMPLE_EVERY_MS = 5000;

interface SseFrame {
  /** performance.now() when the frame was parsed. */
  at: number;
  data: { event?: string; invocation?: { status?: string }; [field: string]: unknown };
}

interface SseClient {
  frames: SseFrame[];
  /** performance.now() when the 200 head arrived, and when the response ended. */
  openedAt: number;
  endedAt: number | undefined;
  /** The first frame (already in or still to come) that `match` accepts. */
  next(match: (frame: SseFrame) => boolean, timeoutMs: number): Promise<SseFrame>;
  close(): void;
}

export interface StreamsResult {
  requested: number;
  failedOpens: string[];
  openAllMs: number;
  /** Per stream: request sent → first state frame, ms; and why streams got none. */
  firstFrameMs: number[];
  firstMissed: Record<string, number>;
  before: ProcessStats;
  during: ProcessStats;
  after: ProcessStats;
  holdMs: number;
  /** The service's CPU time over the hold. */
  holdCpuSeconds: number;
  /** Per stream: heartbeats received, and the lifetime they came in. */
  heartbeats: { count: number; lifetimeMs: number }[];
  heartbeatGapsMs: number[];
  /** Per published change: streams that got it, their latency, and why the others did not. */
  events: { name: string; patchMs: number; reached: number; latencyMs: number[]; missed: Record<string, number> }[];
  closedByServer: number;
}

export async function measureStreams(
  url: string,
  auth: Record<string, string>,
  pid: number,
  options: { streams: number; holdS: number },
): Promise<StreamsResult> {
  const invocation = await callJson<{ id: string }>(url, 'POST', '/invocations', auth, 202, {
    app_name: 'bench',
    action_name: 'stream',
    version: '1',
    async: true,
  });
  const route = `/invocations/${invocation.id}`;
  // Settled, so the service's start-up garbage is not counted against the streams.
  await sleep(2000);
  const before = await processStats(pid);

  const t0 = performance.now();
  const opened = await Promise.allSettled(Array.from({ length: options.streams }, () => openSse(url + route + '/events', auth)));
  const clients = opened.flatMap((o) => (o.status === 'fulfilled' ? [o.value] : []));
  const failedOpens = opened.flatMap((o) => (o.status === 'rejected' ? [String((o.reason as Error).message)] : []));
  const first = await Promise.allSettled(clients.map((c) => c.next(isState('queued'), FRAME_TIMEOUT_MS)));
  const openAllMs = performance.now() - t0;

  // Hold, sampling the service; the sample with the most open files stands for "during".
  const holdStart = performance.now();
  const atHoldStart = await processStats(pid);
  let during = atHoldStart;
  while (performance.now() - holdStart < options.holdS * 1000) {
    await sleep(Math.min(SAMPLE_EVERY_MS, options.holdS * 1000 - (performance.now() - holdStart)));
    const sample = await processStats(pid);
    if (sample.fds >= during.fds) during = sample;
  }
  const holdMs = performance.now() - holdStart;
  const holdCpuSeconds = (await processStats(pid)).cpuSeconds - atHoldStart.cpuSeconds;

  const events = [];
  for (const status of ['running', 'succeeded'] as const) events.push(await publishAndTime(url, route, auth, clients, status));
  // The terminal state ends every stream from the server side.
  await Promise.all(clients.map((c) => waitEnded(c, FRAME_TIMEOUT_MS)));
  const closedByServer = clients.filter((c) => c.endedAt !== undefined).length;
  for (const c of clients) c.close();
  await sleep(2000);
  const after = await processStats(pid);

  const heartbeatFrames = clients.map((c) => c.frames.filter((f) => f.data.event === 'sse_heartbeat'));
  return {
    requested: options.streams,
    failedOpens,
    openAllMs,
    firstFrameMs: first.flatMap((f) => (f.status === 'fulfilled' ? [f.value.at - t0] : [])),
    firstMissed: countReasons(first),
    before,
    during,
    holdCpuSeconds,
    after,
    holdMs,
    heartbeats: clients.map((c, i) => ({ count: heartbeatFrames[i]!.length, lifetimeMs: (c.endedAt ?? performance.now()) - c.openedAt })),
    heartbeatGapsMs: heartbeatFrames.flatMap((frames) => frames.slice(1).map((f, i) => f.at - frames[i]!.at)),
    events,
    closedByServer,
  };
}

/** PATCHes the invocation to `status` and times until every stream has that state. */
async function publishAndTime(url: string, route: string, auth: Record<string, string>, clients: SseClient[], status: 'running' | 'succeeded') {
  const t0 = performance.now();
  await callJson(url, 'PATCH', route, auth, 200, { status });
  const patchMs = performance.now() - t0;
  const arrived = await Promise.allSettled(clients.map((c) => c.next(isState(status), FRAME_TIMEOUT_MS)));
  const latencyMs = arrived.flatMap((a) => (a.status === 'fulfilled' ? [a.value.at - t0] : []));
  return { name: `PATCH status ${status}`, patchMs, reached: latencyMs.length, latencyMs, missed: countReasons(arrived) };
}

function countReasons(results: PromiseSettledResult<unknown>[]): Record<string, number> {
  const reasons: Record<string, number> = {};
  for (const r of results) if (r.status === 'rejected') reasons[(r.reason as Error).message] = (reasons[(r.reason as Error).message] ?? 0) + 1;
  return reasons;
}

const isState = (status: string) => (f: SseFrame) => f.data.event === 'invocation_state' && f.data.invocation?.status === status;

function waitEnded(client: SseClient, timeoutMs: number): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  return new Promise((resolve) => {
    const check = () => (client.endedAt !== undefined || performance.now() > deadline ? resolve() : setTimeout(check, 50));
    check();
  });
}

/**
 * GET `url` as an event stream on its own socket (no pooling). Resolves once the 200
 * head is in; any other status rejects with the body. Frames are the `data:` lines,
 * parsed as JSON.
 */
function openSse(url: string, headers: Record<string, string>): Promise<SseClient> {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { agent: false, headers: { authorization: headers.authorization!, accept: 'text/event-stream' } }, (res) => {
      res.setEncoding('utf8');
      if (res.statusCode !== 200) {
        let text = '';
        res.on('data', (chunk: string) => (text += chunk));
        res.on('end', () => reject(new Error(`GET ${url}: ${res.statusCode} ${text.slice(0, 300)}`)));
        return;
      }
      const waiters = new Set<{ match: (f: SseFrame) => boolean; resolve: (f: SseFrame) => void; reject: (e: Error) => void }>();
      const client: SseClient = {
        frames: [],
        openedAt: performance.now(),
        endedAt: undefined,
        next(match, timeoutMs) {
          const seen = client.frames.find(match);
          if (seen) return Promise.resolve(seen);
          if (client.endedAt !== undefined) return Promise.reject(new Error(endedWithout(client)));
          return new Promise((resolveFrame, rejectFrame) => {
            const waiter = {
              match,
              resolve: (f: SseFrame) => {
                clearTimeout(timer);
                resolveFrame(f);
              },
              reject: (e: Error) => {
                clearTimeout(timer);
                rejectFrame(e);
              },
            };
            const timer = setTimeout(() => {
              waiters.delete(waiter);
              rejectFrame(new Error(`no matching frame within ${timeoutMs} ms`));
            }, timeoutMs);
            waiters.add(waiter);
          });
        },
        close: () => req.destroy(),
      };
      let buffer = '';
      res.on('data', (chunk: string) => {
        buffer += chunk;
        for (let end = buffer.indexOf('\n\n'); end >= 0; end = buffer.indexOf('\n\n')) {
          const data = buffer
            .slice(0, end)
            .split('\n')
            .filter((line) => line.startsWith('data:'))
            .map((line) => line.slice(5).trimStart())
            .join('\n');
          buffer = buffer.slice(end + 2);
          if (!data) continue;
          const frame: SseFrame = { at: performance.now(), data: JSON.parse(data) as SseFrame['data'] };
          client.frames.push(frame);
          for (const waiter of [...waiters]) {
            if (!waiter.match(frame)) continue;
            waiters.delete(waiter);
            waiter.resolve(frame);
          }
        }
      });
      const ended = () => {
        if (client.endedAt !== undefined) return;
        client.endedAt = performance.now();
        for (const waiter of waiters) waiter.reject(new Error(endedWithout(client)));
        waiters.clear();
      };
      res.on('end', ended);
      res.on('close', ended);
      resolve(client);
    });
    req.on('error', reject);
  });
}

/** Why a stream ended without the frame awaited: the server's last error frame, if it sent one. */
function endedWithout(client: SseClient): string {
  const error = client.frames.findLast((f) => f.data.event === 'error')?.data.error as { code?: string } | undefined;
  return error ? `error frame ${error.code ?? '?'}` : 'ended without it';
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const ms = (value: number) => (Number.isNaN(value) ? 'n/a' : value < 10 ? value.toFixed(2) : value.toFixed(0));

const missedText = (missed: Record<string, number>) =>
  Object.keys(missed).length ? `; MISSED: ${Object.entries(missed).map(([why, n]) => `${n} ${why}`).join(', ')}` : '';

export function printStreams(r: StreamsResult, heartbeatMs: number): void {
  const open = r.heartbeats.length;
  // A beat due within the last second of a stream's life may fairly not have arrived.
  const short = r.heartbeats.filter((h) => h.count < Math.floor((h.lifetimeMs - 1000) / heartbeatMs)).length;
  const counts = r.heartbeats.map((h) => h.count);
  console.log(`\nEvent streams: ${r.requested} clients follow one invocation (GET /invocations/{id}/events), one socket each, held ${(r.holdMs / 1000).toFixed(0)} s (load average now ${os.loadavg()[0]!.toFixed(1)})\n`);
  console.log(`Heartbeat interval: ${heartbeatMs / 1000} s (the service's DEFAULT_HEARTBEAT_MS); measured gap p50 ${ms(quantile(r.heartbeatGapsMs, 0.5))} ms, p99 ${ms(quantile(r.heartbeatGapsMs, 0.99))} ms`);
  console.log(`Opened: ${open} of ${r.requested}${r.failedOpens.length ? ` (failed: ${r.failedOpens.length}, first: ${r.failedOpens[0]})` : ''}`);
  console.log('\n| measure | value |');
  console.log('|---|---|');
  console.log(`| all ${open} streams open, first frame in each | ${ms(r.openAllMs)} ms |`);
  console.log(
    `| request → first frame, per stream | ${r.firstFrameMs.length}/${open}; p50 ${ms(quantile(r.firstFrameMs, 0.5))} ms, p99 ${ms(quantile(r.firstFrameMs, 0.99))} ms${missedText(r.firstMissed)} |`,
  );
  console.log(
    `| heartbeats per stream | min ${Math.min(...counts)}, p50 ${quantile(counts, 0.5)}, max ${Math.max(...counts)}; streams short of a due beat: ${short} |`,
  );
  for (const e of r.events) {
    console.log(
      `| ${e.name} → frame in every stream | reached ${e.reached}/${open}; p50 ${ms(quantile(e.latencyMs, 0.5))} ms, p99 ${ms(quantile(e.latencyMs, 0.99))} ms, ` +
        `last ${ms(Math.max(...e.latencyMs))} ms (PATCH answered in ${ms(e.patchMs)} ms)${missedText(e.missed)} |`,
    );
  }
  console.log(`| streams closed by the server after the terminal state | ${r.closedByServer}/${open} |`);
  console.log('\n| service process | RSS | open files |');
  console.log('|---|---|---|');
  console.log(`| before | ${mib(r.before.rssBytes)} MiB | ${r.before.fds} |`);
  console.log(`| during (${open} streams) | ${mib(r.during.rssBytes)} MiB | ${r.during.fds} |`);
  console.log(`| after (all closed) | ${mib(r.after.rssBytes)} MiB | ${r.after.fds} |`);
  const perStream = (r.during.rssBytes - r.before.rssBytes) / Math.max(open, 1);
  console.log(
    `\nPer stream: +${(perStream / 1024).toFixed(1)} KiB service RSS; holding them cost the service ${r.holdCpuSeconds.toFixed(2)} CPU-s in ${(r.holdMs / 1000).toFixed(0)} s ` +
      `(${((100 * r.holdCpuSeconds) / (r.holdMs / 1000)).toFixed(1)}% of one core)`,
  );
}
