import type Kernel from '@onkernel/sdk';
import { APIConnectionError, APIError } from '@onkernel/sdk';
import WebSocket from 'ws';

/**
 * Client operations fired at a service that is about to be killed, and what each client
 * saw. The rule the fault tests hold the service to: every client sees either a clear
 * error (the connection dropped, a 5xx, or a 4xx with a code) or a success that is true
 * afterwards; `clearError` is the first half, the tests check the second against the
 * database after the restart.
 */

export type Seen<T> = { ok: true; value: T } | { ok: false; error: unknown };

export async function settle<T>(promise: Promise<T>): Promise<Seen<T>> {
  try {
    return { ok: true, value: await promise };
  } catch (error) {
    return { ok: false, error };
  }
}

/** Why an error is a clear one, or undefined when it is not (then the test names it). */
export function clearError(error: unknown): string | undefined {
  if (error instanceof APIConnectionError) return 'connection';
  if (error instanceof APIError && typeof error.status === 'number') {
    if (error.status >= 500) return `${error.status}`;
    const body: unknown = error.error;
    const code = typeof body === 'object' && body !== null && 'code' in body ? body.code : undefined;
    if (error.status >= 400 && typeof code === 'string' && code !== '') return `${error.status} ${code}`;
  }
  return undefined;
}

export function describeError(error: unknown): string {
  if (error instanceof APIError) return `${error.constructor.name} ${String(error.status)} ${JSON.stringify(error.error)}`;
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}

/** Tallies of what clients saw, by operation and kind (for the printed figures). */
export function tally(outcomes: Array<{ op: string; seen: Seen<unknown> }>): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const { op, seen } of outcomes) {
    const key = `${op}:${seen.ok ? 'ok' : (clearError(seen.error) ?? 'UNCLEAR')}`;
    counts[key] = (counts[key] ?? 0) + 1;
  }
  return counts;
}

/** The browser answers over its session's cdp_ws_url (through the service's proxy): Browser.getVersion. */
export function cdpAnswers(cdpWsUrl: string, timeoutMs = 15_000): Promise<boolean> {
  return new Promise((resolve) => {
    const ws = new WebSocket(cdpWsUrl);
    const done = (ok: boolean) => {
      clearTimeout(timer);
      ws.removeAllListeners();
      ws.on('error', () => undefined);
      ws.terminate();
      resolve(ok);
    };
    const timer = setTimeout(() => done(false), timeoutMs);
    ws.once('open', () => ws.send(JSON.stringify({ id: 1, method: 'Browser.getVersion' })));
    ws.on('message', (data: Buffer) => {
      const message = JSON.parse(data.toString()) as { id?: number; result?: { product?: string } };
      if (message.id === 1) done(typeof message.result?.product === 'string');
    });
    ws.once('error', () => done(false));
    ws.once('close', () => done(false));
  });
}

export interface PoolLease {
  name: string;
  sessionId: string;
}

/** An acquire with a unique lease name, so its row can be told apart whatever the client saw. */
export async function acquire(kernel: Kernel, poolId: string, name: string, waitSeconds: number): Promise<PoolLease | undefined> {
  const lease = await kernel.browserPools.acquire(poolId, { name, acquire_timeout_seconds: waitSeconds });
  // 204 (no browser within the wait): the SDK resolves to an empty body.
  return lease && typeof lease === 'object' && 'session_id' in lease ? { name, sessionId: lease.session_id } : undefined;
}
