import type { CdpMux, VirtualConnection } from './mux.js';

/**
 * A short-lived CDP connection of the agent's own (a virtual connection on the pipe, see
 * mux.ts), for browser-level commands (window bounds, a reset) and, with `sessionId`,
 * commands to a page it attached to. It bypasses the CDP bridge, so it is not a client
 * connection and never keeps a session from its idle timeout.
 */
export interface BrowserCdp {
  send<T = Record<string, unknown>>(method: string, params?: Record<string, unknown>, sessionId?: string): Promise<T>;
}

const COMMAND_TIMEOUT_MS = 10_000;

export async function withBrowserCdp<T>(mux: CdpMux, work: (cdp: BrowserCdp) => Promise<T>): Promise<T> {
  const connection = await mux.connect();
  try {
    return await work(commandsOver(connection));
  } finally {
    connection.close();
  }
}

function commandsOver(connection: VirtualConnection): BrowserCdp {
  const pending = new Map<number, { resolve: (value: never) => void; reject: (error: Error) => void }>();
  connection.setOnMessage((text) => {
    const message = JSON.parse(text) as { id?: number; result?: unknown; error?: { message: string } };
    const waiter = message.id === undefined ? undefined : pending.get(message.id);
    if (!waiter) return;
    pending.delete(message.id!);
    if (message.error) waiter.reject(new Error(message.error.message));
    else waiter.resolve(message.result as never);
  });
  connection.onClose(() => {
    for (const { reject } of pending.values()) reject(new Error('the browser closed the CDP connection'));
    pending.clear();
  });
  let nextId = 0;
  return {
    send: (method, params = {}, sessionId) =>
      new Promise((resolve, reject) => {
        const id = ++nextId;
        const timer = setTimeout(() => {
          pending.delete(id);
          reject(new Error(`${method} got no answer within ${COMMAND_TIMEOUT_MS} ms`));
        }, COMMAND_TIMEOUT_MS);
        pending.set(id, {
          resolve: (value) => {
            clearTimeout(timer);
            resolve(value);
          },
          reject: (error) => {
            clearTimeout(timer);
            reject(error);
          },
        });
        connection.send(JSON.stringify({ id, method, params, ...(sessionId ? { sessionId } : {}) }));
      }),
  };
}
