import type { CdpMux, VirtualConnection } from '../cdp/mux.js';

/**
 * A CDP connection of the agent's own (a virtual connection on the pipe, cdp/mux.ts) that
 * also hears events, which cdp/client.ts drops: curl follows its request through
 * Fetch.requestPaused and Network events. Commands have no timeout of their own: the
 * caller's deadline closes the connection, which fails whatever is still pending.
 */

export interface CdpEvent {
  method: string;
  params: Record<string, unknown>;
  sessionId?: string;
}

export interface EventedCdp {
  send<T = Record<string, unknown>>(method: string, params?: Record<string, unknown>, sessionId?: string): Promise<T>;
  onEvent(listener: (event: CdpEvent) => void): void;
  /** Fails pending commands with `reason` and detaches (Chromium then drops the session's hidden targets). */
  close(reason?: Error): void;
}

export async function openEventedCdp(mux: CdpMux): Promise<EventedCdp> {
  return over(await mux.connect());
}

function over(connection: VirtualConnection): EventedCdp {
  const pending = new Map<number, { resolve: (value: never) => void; reject: (error: Error) => void }>();
  const listeners: ((event: CdpEvent) => void)[] = [];
  let closedWith: Error | undefined;
  const failAll = (error: Error) => {
    for (const { reject } of pending.values()) reject(error);
    pending.clear();
  };
  connection.setOnMessage((text) => {
    const message = JSON.parse(text) as { id?: number; result?: unknown; error?: { message: string }; method?: string; params?: Record<string, unknown>; sessionId?: string };
    if (message.id === undefined) {
      if (message.method) for (const listener of listeners) listener({ method: message.method, params: message.params ?? {}, ...(message.sessionId ? { sessionId: message.sessionId } : {}) });
      return;
    }
    const waiter = pending.get(message.id);
    if (!waiter) return;
    pending.delete(message.id);
    if (message.error) waiter.reject(new Error(message.error.message));
    else waiter.resolve(message.result as never);
  });
  connection.onClose(() => {
    closedWith ??= new Error('the browser closed the CDP connection');
    failAll(closedWith);
  });
  let nextId = 0;
  return {
    send: (method, params = {}, sessionId) =>
      new Promise((resolve, reject) => {
        if (closedWith) return reject(closedWith);
        const id = ++nextId;
        pending.set(id, { resolve, reject });
        connection.send(JSON.stringify({ id, method, params, ...(sessionId ? { sessionId } : {}) }));
      }),
    onEvent: (listener) => listeners.push(listener),
    close: (reason) => {
      closedWith ??= reason ?? new Error('the curl connection was closed');
      connection.close();
    },
  };
}
