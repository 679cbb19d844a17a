import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createProxy } from 'proxy';

/**
 * Real network pieces for proxy checks: an HTTP forward proxy (absolute-form GET and
 * CONNECT, optional Basic auth) and a check server that answers with the caller's address.
 */

export interface CheckServer {
  url: string;
  /** Requests it has answered. */
  hits: number;
  close(): Promise<void>;
}

/** Answers every GET with the address the request came from (the proxy's egress). */
export async function startCheckServer(host = '127.0.0.2'): Promise<CheckServer> {
  const state = { hits: 0 };
  const server = createServer((req, res) => {
    state.hits += 1;
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.end(`${(req.socket.remoteAddress ?? '').replace(/^::ffff:/, '')}\n`);
  });
  const url = `http://${host}:${await listen(server, host)}/ip`;
  return {
    url,
    get hits() {
      return state.hits;
    },
    close: () => close(server),
  };
}

export interface ForwardProxy {
  host: string;
  port: number;
  /** Proxy-Authorization headers received, decoded `user:password` (for proofs only). */
  credentialsSeen: string[];
  /** Requests refused with 407. */
  refusals: number;
  /** Requests it forwarded. */
  forwarded: number;
  close(): Promise<void>;
}

/**
 * A forward proxy on `host` that connects out from `egress` (so the check server sees
 * that address), requiring Basic auth when `auth` is given.
 */
export async function startForwardProxy(
  options: { host?: string; egress?: string; auth?: { username: string; password: string } } = {},
): Promise<ForwardProxy> {
  const host = options.host ?? '127.0.0.1';
  const state = { credentialsSeen: [] as string[], refusals: 0, forwarded: 0 };
  const server = createProxy(createServer());
  if (options.egress) server.localAddress = options.egress;
  server.authenticate = (req: IncomingMessage) => {
    const header = req.headers['proxy-authorization'];
    const decoded = header?.startsWith('Basic ') ? Buffer.from(header.slice(6), 'base64').toString('utf8') : undefined;
    if (decoded !== undefined) state.credentialsSeen.push(decoded);
    const ok = !options.auth || decoded === `${options.auth.username}:${options.auth.password}`;
    if (ok) state.forwarded += 1;
    else state.refusals += 1;
    return ok;
  };
  const port = await listen(server, host);
  return {
    host,
    port,
    credentialsSeen: state.credentialsSeen,
    get refusals() {
      return state.refusals;
    },
    get forwarded() {
      return state.forwarded;
    },
    close: () => close(server),
  };
}

/** A port on which nothing listens: bound, then closed. */
export async function deadPort(host = '127.0.0.1'): Promise<number> {
  const server = createServer();
  const port = await listen(server, host);
  await close(server);
  return port;
}

function listen(server: Server, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, host, () => resolve((server.address() as AddressInfo).port));
  });
}

function close(server: Server): Promise<void> {
  server.closeAllConnections();
  return new Promise((resolve) => server.close(() => resolve()));
}
