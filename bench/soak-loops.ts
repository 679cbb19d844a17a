/**
 * The work the soak (bench/soak.ts) keeps up: browser sessions created, driven and
 * deleted; leases taken from and given back to a small warm pool by more clients than it
 * has browsers; cheap API churn with an SSE stream. Every operation has a time limit and
 * every loop a count limit besides the deadline, so the soak ends by itself whatever the
 * service does.
 */
import { chromium } from 'playwright-core';
import { percentile, sleep } from './soak-support.js';

export interface Answer {
  status: number;
  body: unknown;
}

/** The API over fetch; a status other than `expect` is an error naming the answer's code. */
export class Api {
  constructor(
    readonly url: string,
    readonly key: string,
  ) {}

  async call(method: string, route: string, options: { body?: unknown; expect: number[]; signal?: AbortSignal }): Promise<Answer> {
    const res = await fetch(this.url + route, {
      method,
      headers: { authorization: `Bearer ${this.key}`, ...(options.body !== undefined ? { 'content-type': 'application/json' } : {}) },
      ...(options.body !== undefined ? { body: JSON.stringify(options.body) } : {}),
      signal: options.signal ?? AbortSignal.timeout(30_000),
    });
    const text = await res.text();
    const body: unknown = text && res.headers.get('content-type')?.includes('json') ? JSON.parse(text) : text;
    if (!options.expect.includes(res.status)) {
      const code = (body as { code?: string } | undefined)?.code ?? '';
      throw new Error(`${method} ${route.replace(/\/[a-z]+_[a-z2-7]{10,}/g, '/{id}')}: ${res.status} ${code}`);
    }
    return { status: res.status, body };
  }
}

/** Operations done and failed, by kind; the first few messages of each failure kind. */
export class Tally {
  readonly ok = new Map<string, number>();
  readonly errors = new Map<string, number>();
  readonly messages = new Map<string, string[]>();
  /** Browser cycles completed (a session created, used and deleted; a lease taken, used and given back). */
  cycles = 0;
  readonly acquireWaitsMs: number[] = [];
  emptyAcquires = 0;

  /** Runs one operation with a time limit; its result, or undefined when it failed (counted). */
  async run<T>(kind: string, timeoutMs: number, work: (signal: AbortSignal) => Promise<T>): Promise<T | undefined> {
    const limit = new AbortController();
    const timer = setTimeout(() => limit.abort(new Error(`${kind} took more than ${timeoutMs / 1000} s`)), timeoutMs);
    const aborted = new Promise<never>((_, reject) => limit.signal.addEventListener('abort', () => reject(limit.signal.reason as Error)));
    try {
      const result = await Promise.race([work(limit.signal), aborted]);
      this.ok.set(kind, (this.ok.get(kind) ?? 0) + 1);
      return result;
    } catch (error) {
      this.errors.set(kind, (this.errors.get(kind) ?? 0) + 1);
      const seen = this.messages.get(kind) ?? [];
      if (seen.length < 3) seen.push(error instanceof Error ? error.message : String(error));
      this.messages.set(kind, seen);
      return undefined;
    } finally {
      clearTimeout(timer);
      limit.abort(new Error('done'));
    }
  }

  /** "session 12/0 pool 30/1 ..." : successes/errors summed over the kinds of each family. */
  line(): string {
    const families = new Map<string, [number, number]>();
    for (const [kinds, add] of [
      [this.ok, 0],
      [this.errors, 1],
    ] as const) {
      for (const [kind, n] of kinds) {
        const family = kind.split('.')[0]!;
        const entry = families.get(family) ?? [0, 0];
        entry[add] += n;
        families.set(family, entry);
      }
    }
    return [...families].map(([family, [ok, failed]]) => `${family} ${ok}/${failed}`).join(' ');
  }

  acquireWaitLine(): string {
    const w = this.acquireWaitsMs;
    return `${w.length} leases, wait p50 ${percentile(w, 0.5).toFixed(0)} ms, p99 ${percentile(w, 0.99).toFixed(0)} ms, max ${Math.max(0, ...w).toFixed(0)} ms; ${this.emptyAcquires} acquire(s) answered 204 after waiting`;
  }
}

export interface LoopContext {
  api: Api;
  tally: Tally;
  /** True once the soak's time is up. */
  stopping(): boolean;
  /** Count bound of each loop, beside the deadline. */
  maxIterations: number;
}

/**
 * Connects over the session's cdp_ws_url (through the service's CDP proxy), loads page k
 * and checks its script ran; the text read. Disconnecting leaves the browser to its owner.
 */
export async function driveBrowser(cdpWsUrl: string, pageUrl: string, k: number, signal: AbortSignal): Promise<string> {
  const browser = await chromium.connectOverCDP(cdpWsUrl, { timeout: 30_000 });
  const closeOnAbort = () => void browser.close().catch(() => undefined);
  signal.addEventListener('abort', closeOnAbort);
  try {
    const context = browser.contexts()[0] ?? (await browser.newContext());
    const page = context.pages()[0] ?? (await context.newPage());
    await page.goto(`${pageUrl}/n/${k}`, { timeout: 30_000 });
    const text = await page.textContent('#v', { timeout: 10_000 });
    if (text !== String(k * 7)) throw new Error(`page ${k} read ${JSON.stringify(text)}, expected ${k * 7}`);
    return text;
  } finally {
    signal.removeEventListener('abort', closeOnAbort);
    await browser.close().catch(() => undefined);
  }
}

interface Session {
  session_id: string;
  cdp_ws_url: string;
}

/** Create, drive, delete; loop `index` 0 makes every 4th session headful, so Xvfb comes and goes too. */
export async function sessionLoop(ctx: LoopContext, index: number, pageUrl: string): Promise<void> {
  for (let n = 0; !ctx.stopping() && n < ctx.maxIterations; n++) {
    const headless = !(index === 0 && n % 4 === 3);
    const created = await ctx.tally.run('session.create', 90_000, (signal) =>
      ctx.api.call('POST', '/browsers', { body: { headless, timeout_seconds: 120 }, expect: [200], signal }),
    );
    if (!created) {
      await sleep(2000);
      continue;
    }
    const session = created.body as Session;
    const used = await ctx.tally.run('session.use', 90_000, (signal) => driveBrowser(session.cdp_ws_url, pageUrl, index * 100_000 + n, signal));
    const deleted = await ctx.tally.run('session.delete', 60_000, (signal) =>
      ctx.api.call('DELETE', `/browsers/${session.session_id}`, { expect: [204], signal }),
    );
    if (used && deleted) ctx.tally.cycles++;
  }
}

/** Acquire (waiting when both browsers are out), drive, release; every 5th release closes the browser (reuse false). */
export async function poolClientLoop(ctx: LoopContext, route: string, index: number, pageUrl: string): Promise<void> {
  for (let n = 0; !ctx.stopping() && n < ctx.maxIterations; n++) {
    const t0 = performance.now();
    const lease = await ctx.tally.run('pool.acquire', 90_000, (signal) =>
      ctx.api.call('POST', `${route}/acquire`, { body: { acquire_timeout_seconds: 60 }, expect: [200, 204], signal }),
    );
    if (!lease) {
      await sleep(2000);
      continue;
    }
    if (lease.status === 204) {
      ctx.tally.emptyAcquires++;
      continue;
    }
    ctx.tally.acquireWaitsMs.push(performance.now() - t0);
    const session = lease.body as Session;
    const used = await ctx.tally.run('pool.use', 90_000, (signal) => driveBrowser(session.cdp_ws_url, pageUrl, 1_000_000 + index * 100_000 + n, signal));
    const released = await ctx.tally.run('pool.release', 60_000, (signal) =>
      ctx.api.call('POST', `${route}/release`, { body: { session_id: session.session_id, reuse: n % 5 !== 4 }, expect: [204], signal }),
    );
    if (used && released) ctx.tally.cycles++;
  }
}

const TOTP_SECRET = 'JBSWY3DPEHPK3PXP';

/** Profiles and credentials made, read and deleted; an invocation's SSE stream opened and closed. */
export async function churnLoop(ctx: LoopContext, pauseMs: number): Promise<void> {
  const { api, tally } = ctx;
  const call = (kind: string, method: string, route: string, expect: number, body?: unknown) =>
    tally.run(kind, 30_000, (signal) => api.call(method, route, { body, expect: [expect], signal }));
  for (let n = 0; !ctx.stopping() && n < ctx.maxIterations; n++) {
    const profile = await call('profile.create', 'POST', '/profiles', 200, { name: `soak-${n}` });
    await call('profile.list', 'GET', '/profiles?limit=20', 200);
    if (profile) await call('profile.delete', 'DELETE', `/profiles/${(profile.body as { id: string }).id}`, 204);
    const credential = await call('credential.create', 'POST', '/credentials', 200, {
      name: `soak-${n}`,
      domain: 'soak.example.com',
      values: { username: 'soak', password: `pw-${n}` },
      totp_secret: TOTP_SECRET,
    });
    if (credential) {
      const id = (credential.body as { id: string }).id;
      await call('credential.totp', 'GET', `/credentials/${id}/totp-code`, 200);
      await call('credential.list', 'GET', '/credentials?limit=20', 200);
      await call('credential.delete', 'DELETE', `/credentials/${id}`, 204);
    }
    await tally.run('sse.stream', 30_000, (signal) => sseRound(api, n % 2 === 0 ? 'client' : 'server', signal));
    await sleep(pauseMs);
  }
}

/**
 * An invocation's event stream: read its first state; then either the client hangs up
 * (and the invocation is finished after) or the invocation is finished while watched and
 * the server must send the final state and close the stream.
 */
async function sseRound(api: Api, closer: 'client' | 'server', signal: AbortSignal): Promise<void> {
  const created = await api.call('POST', '/invocations', { body: { app_name: 'soak', action_name: 'sse', version: '1', async: true }, expect: [202], signal });
  const id = (created.body as { id: string }).id;
  let finished = false;
  const finish = async (finishSignal: AbortSignal) => {
    await api.call('PATCH', `/invocations/${id}`, { body: { status: 'succeeded' }, expect: [200], signal: finishSignal });
    finished = true;
  };
  const hangUp = new AbortController();
  signal.addEventListener('abort', () => hangUp.abort());
  try {
    const res = await fetch(`${api.url}/invocations/${id}/events`, {
      headers: { authorization: `Bearer ${api.key}`, accept: 'text/event-stream' },
      signal: hangUp.signal,
    });
    if (res.status !== 200 || !res.body) throw new Error(`GET /invocations/{id}/events: ${res.status}`);
    const frames = readFrames(res.body);
    const first = await frames.next();
    if (first.done || first.value.event !== 'invocation_state') throw new Error(`the stream's first frame was ${JSON.stringify(first.value)}`);
    if (closer === 'client') hangUp.abort();
    await finish(signal);
    if (closer === 'client') return;
    let last: { event?: string; invocation?: { status?: string } } | undefined;
    for await (const frame of frames) last = frame;
    if (last?.invocation?.status !== 'succeeded') throw new Error(`the stream closed after ${JSON.stringify(last)}, not the succeeded state`);
  } finally {
    hangUp.abort();
    // A failed round still finishes its invocation, so open invocations left at the end are the service's.
    if (!finished) await finish(AbortSignal.timeout(10_000)).catch(() => undefined);
  }
}

async function* readFrames(body: ReadableStream<Uint8Array>): AsyncGenerator<{ event?: string; invocation?: { status?: string } }> {
  const decoder = new TextDecoder();
  let buffer = '';
  for await (const chunk of body) {
    buffer += decoder.decode(chunk, { stream: true });
    let end;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const frame = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const data = frame
        .split('\n')
        .filter((line) => line.startsWith('data:'))
        .map((line) => line.slice(5).trim())
        .join('\n');
      if (data) yield JSON.parse(data) as { event?: string; invocation?: { status?: string } };
    }
  }
}
