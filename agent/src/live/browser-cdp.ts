import WebSocket from 'ws';

/**
 * A short-lived CDP connection of the agent's own to Chromium's browser endpoint, for
 * browser-level commands (window bounds). It bypasses the CDP bridge, so it is not a
 * client connection and never keeps a session from its idle timeout.
 */
export interface BrowserCdp {
  send<T = Record<string, unknown>>(method: string, params?: Record<string, unknown>): Promise<T>;
}

const COMMAND_TIMEOUT_MS = 10_000;

export async function withBrowserCdp<T>(browserWsUrl: string, work: (cdp: BrowserCdp) => Promise<T>): Promise<T> {
  const socket = new WebSocket(browserWsUrl, { perMessageDeflate: false, handshakeTimeout: COMMAND_TIMEOUT_MS });
  const pending = new Map<number, { resolve: (value: never) => void; reject: (error: Error) => void }>();
  const failAll = (error: Error) => {
    for (const { reject } of pending.values()) reject(error);
    pending.clear();
  };
  socket.on('message', (data) => {
    const message = JSON.parse((data as Buffer).toString('utf8')) as { id?: number; result?: unknown; error?: { message: string } };
    const waiter = message.id === undefined ? undefined : pending.get(message.id);
    if (!waiter) return;
    pending.delete(message.id!);
    if (message.error) waiter.reject(new Error(message.error.message));
    else waiter.resolve(message.result as never);
  });
  socket.on('close', () => failAll(new Error('the browser closed the CDP connection')));
  await new Promise<void>((resolve, reject) => {
    socket.once('open', () => resolve());
    socket.once('error', reject);
  });
  socket.on('error', (error) => failAll(error));
  let nextId = 0;
  const cdp: BrowserCdp = {
    send: (method, params = {}) =>
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
        socket.send(JSON.stringify({ id, method, params }));
      }),
  };
  try {
    return await work(cdp);
  } finally {
    socket.close();
  }
}
