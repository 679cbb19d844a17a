import { readFile } from 'node:fs/promises';
import Kernel from '@onkernel/sdk';
import type { BrowserPool, BrowserPoolAcquireResponse } from '@onkernel/sdk/resources/browser-pools';
import pg from 'pg';
import { expect } from 'vitest';
import WebSocket from 'ws';
import { eventually } from '../support/eventually.js';
import type { TestApp } from '../support/test-app.js';

/**
 * Helpers for pool tests with real Chromium: the SDK against the in-process app, a bare
 * CDP client over a lease's cdp_ws_url, and the database read as the test's own client.
 */

/** The SDK against the app, retries off so each call is exactly one request. */
export const sdkFor = (app: TestApp, apiKey = app.tenant.adminKey) => new Kernel({ apiKey, baseURL: app.url, maxRetries: 0 });

/** The SDK types acquire as always returning a session; on 204 it resolves to null. */
export type Lease = BrowserPoolAcquireResponse;
export const acquire = (kernel: Kernel, pool: string, body: Parameters<Kernel['browserPools']['acquire']>[1] = {}) =>
  kernel.browserPools.acquire(pool, body) as Promise<Lease | null>;

/** Acquires and insists on a browser (a 204 fails the test with a clear message). */
export async function leaseFrom(kernel: Kernel, pool: string, body: Parameters<Kernel['browserPools']['acquire']>[1] = {}): Promise<Lease> {
  const lease = await acquire(kernel, pool, body);
  if (!lease) throw new Error(`acquire from pool ${pool} answered 204: no browser was free`);
  return lease;
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Waits until the pool reports `available` idle browsers and `acquired` leased ones. */
export function poolAt(kernel: Kernel, poolId: string, counts: { available: number; acquired: number }, timeoutMs = 90_000): Promise<BrowserPool> {
  return eventually(
    async () => {
      const pool = await kernel.browserPools.retrieve(poolId);
      return pool.available_count === counts.available && pool.acquired_count === counts.acquired ? pool : undefined;
    },
    { timeoutMs, intervalMs: 200, what: `pool ${poolId} at ${JSON.stringify(counts)}`, retryErrors: true },
  );
}

/** A pool browser's row, as the database holds it. */
export interface PoolBrowserRow {
  id: string;
  pool_id: string | null;
  leased_at: Date | null;
  agent_url: string | null;
  phase: string;
  deleted_at: Date | null;
  deleted_reason: string | null;
}

/**
 * The test's own view of the database, on a connection of its own so that checking never
 * takes one of the app's few pool connections away from the acquirers.
 */
export class PoolRows {
  private readonly db: pg.Pool;
  constructor(url: string) {
    this.db = new pg.Pool({ connectionString: url, max: 2 });
  }

  async session(id: string): Promise<PoolBrowserRow | undefined> {
    const { rows } = await this.db.query<PoolBrowserRow>(
      'SELECT id, pool_id, leased_at, agent_url, phase, deleted_at, deleted_reason FROM browser_sessions WHERE id = $1',
      [id],
    );
    return rows[0];
  }

  /** Every row of the pool, live or ended, oldest first. */
  async ofPool(poolId: string): Promise<PoolBrowserRow[]> {
    const { rows } = await this.db.query<PoolBrowserRow>(
      'SELECT id, pool_id, leased_at, agent_url, phase, deleted_at, deleted_reason FROM browser_sessions WHERE pool_id = $1 ORDER BY seq',
      [poolId],
    );
    return rows;
  }

  async live(poolId: string): Promise<PoolBrowserRow[]> {
    return (await this.ofPool(poolId)).filter((r) => r.deleted_at === null);
  }

  /** Live idle browsers that are ready to lease. */
  async idle(poolId: string): Promise<PoolBrowserRow[]> {
    return (await this.live(poolId)).filter((r) => r.leased_at === null && r.phase === 'running');
  }

  close(): Promise<void> {
    return this.db.end();
  }
}

/** The --user-data-dir of the Chromium the browser's agent reports (its pid's command line). */
export async function agentBrowserDir(app: TestApp, row: { id: string; agent_url: string | null }): Promise<string> {
  const args = (await readFile(`/proc/${await agentBrowserPid(app, row)}/cmdline`, 'utf8')).split('\0');
  const dir = args.find((arg) => arg.startsWith('--user-data-dir='))?.slice('--user-data-dir='.length);
  if (!dir) throw new Error(`the Chromium of ${row.agent_url} has no --user-data-dir`);
  return dir;
}

/** Chromium's main pid as the browser's agent reports it (GET <agent>/health). */
export async function agentBrowserPid(app: TestApp, row: { id: string; agent_url: string | null }): Promise<number> {
  const agentUrl = row.agent_url!;
  const res = await fetch(`${agentUrl.replace(/\/+$/, '')}/health`, { signal: AbortSignal.timeout(5_000), headers: { authorization: `Bearer ${app.deps.agentTokens(row.id)}` } });
  const body = (await res.json()) as { browser?: { pid?: number } | null };
  const pid = body.browser?.pid;
  if (typeof pid !== 'number') throw new Error(`the agent at ${agentUrl} reported no browser pid: ${JSON.stringify(body)}`);
  return pid;
}

/** The upgrade was answered with an HTTP status instead of a WebSocket. */
export class CdpRefused extends Error {
  constructor(readonly status: number) {
    super(`the CDP endpoint refused the connection with HTTP ${status}`);
  }
}

/** A bare CDP client on the browser target: a few commands are all these tests send. */
export class CdpSocket {
  private nextId = 1;
  private readonly pending = new Map<number, { resolve: (v: any) => void; reject: (e: Error) => void; method: string }>();
  /** Resolves with the close code once the socket closed, whoever closed it. */
  readonly closed: Promise<number>;

  private constructor(private readonly ws: WebSocket) {
    this.closed = new Promise((resolve) => {
      ws.once('close', (code) => {
        for (const p of this.pending.values()) p.reject(new Error(`the CDP socket closed (${code}) before ${p.method} answered`));
        this.pending.clear();
        resolve(code);
      });
    });
    ws.on('message', (data: Buffer) => {
      const message = JSON.parse(data.toString('utf8')) as { id?: number; result?: unknown; error?: { message: string } };
      const waiter = message.id === undefined ? undefined : this.pending.get(message.id);
      if (!waiter) return;
      this.pending.delete(message.id!);
      if (message.error) waiter.reject(new Error(`${waiter.method}: ${message.error.message}`));
      else waiter.resolve(message.result);
    });
  }

  static open(url: string, timeoutMs = 15_000): Promise<CdpSocket> {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(url, { perMessageDeflate: false, handshakeTimeout: timeoutMs });
      // Errors after the upgrade end in 'close', which fails whatever is pending.
      ws.on('error', reject);
      ws.once('unexpected-response', (request, response) => {
        response.resume();
        request.destroy();
        reject(new CdpRefused(response.statusCode ?? 0));
      });
      ws.once('open', () => resolve(new CdpSocket(ws)));
    });
  }

  get isOpen(): boolean {
    return this.ws.readyState === WebSocket.OPEN;
  }

  send<T = any>(method: string, params: Record<string, unknown> = {}, timeoutMs = 15_000): Promise<T> {
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new Error(`${method} got no answer within ${timeoutMs} ms`));
      }, timeoutMs);
      this.pending.set(id, {
        method,
        resolve: (v) => (clearTimeout(timer), resolve(v as T)),
        reject: (e) => (clearTimeout(timer), reject(e)),
      });
      this.ws.send(JSON.stringify({ id, method, params }));
    });
  }

  /**
   * Which browser is at the other end: its --user-data-dir, as Chromium reports its own
   * command line. Not its pid: as root each Chromium is pid 1 of its own pid namespace
   * (agent/src/isolation.ts), which is what it reports.
   */
  async browserDir(): Promise<string> {
    const { commandLine } = await this.send<{ commandLine: string }>('SystemInfo.getInfo');
    const dir = /--user-data-dir=(\S+)/.exec(commandLine)?.[1];
    if (!dir) throw new Error(`SystemInfo.getInfo gave no --user-data-dir: ${commandLine}`);
    return dir;
  }

  async close(): Promise<void> {
    if (this.ws.readyState === WebSocket.OPEN || this.ws.readyState === WebSocket.CONNECTING) this.ws.close();
    await this.closed;
  }
}

/** Resolves with the HTTP status that refused the URL; fails if the WebSocket opened. */
export async function refusal(url: string): Promise<number> {
  try {
    const socket = await CdpSocket.open(url);
    await socket.close();
  } catch (error) {
    if (error instanceof CdpRefused) return error.status;
    throw error;
  }
  throw new Error(`expected ${url} to be refused, but the WebSocket opened`);
}

/** Resolves with the close code, or fails when the socket is still open after `timeoutMs`. */
export async function closesWithin(socket: CdpSocket, timeoutMs: number): Promise<number> {
  const timeout = sleep(timeoutMs).then(() => 'open' as const);
  const outcome = await Promise.race([socket.closed, timeout]);
  expect(outcome, `the CDP socket should close within ${timeoutMs} ms`).not.toBe('open');
  return outcome as number;
}
