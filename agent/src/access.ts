import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';

/**
 * Who may talk to the agent: the service, and nobody else. The agent's port is on
 * 127.0.0.1 (a pod IP in Kubernetes), which every web page a Chromium on this host (or in
 * this pod) shows can reach: a page could read and write the browser's files, or open
 * /cdp and take the browser over. So:
 * - every request presents the browser's agent token (`Authorization: Bearer <token>`,
 *   compared in constant time), HTTP and WebSocket upgrades alike; a page cannot know it;
 * - a request a browser made is refused outright, token or not: browsers send Origin on
 *   every WebSocket handshake and cross-origin or non-GET fetch, and Sec-Fetch-Site on
 *   every request to a loopback address, and the service sends neither;
 * - the Host must be an IP literal or localhost, so a page that rebinds its own DNS name
 *   to 127.0.0.1 (DNS rebinding, which makes its requests same-origin) is refused too.
 * GET /health without a token answers only {status}, for kubelet probes (see health in
 * server.ts).
 */

export interface Refusal {
  status: 401 | 403;
  code: 'unauthorized' | 'forbidden_origin' | 'forbidden_host';
  message: string;
}

/** An IPv4 literal, a bracketed IPv6 literal or localhost, with an optional port. */
const LITERAL_HOST = /^(?:localhost|\d{1,3}(?:\.\d{1,3}){3}|\[[0-9a-f:.]+\])(?::\d{1,5})?$/i;

/** Refuses requests a web browser made or addressed by a name other than an IP literal or localhost. */
export function originRefusal(request: IncomingMessage): Refusal | undefined {
  const { headers } = request;
  if (headers.origin !== undefined || headers['sec-fetch-site'] !== undefined) {
    return { status: 403, code: 'forbidden_origin', message: 'requests from web pages are refused: only the service may call the agent' };
  }
  if (!LITERAL_HOST.test(headers.host ?? '')) {
    return { status: 403, code: 'forbidden_host', message: 'the Host header must be an IP address or localhost' };
  }
  return undefined;
}

/** Constant-time comparison of `Authorization: Bearer <token>` (both hashed first, so lengths never leak). */
export function bearerMatches(header: string | undefined, token: string): boolean {
  const given = /^Bearer (\S+)$/i.exec(header ?? '')?.[1] ?? '';
  const digest = (value: string) => createHash('sha256').update(value).digest();
  return timingSafeEqual(digest(given), digest(token)) && token.length > 0;
}

export const UNAUTHORIZED: Refusal = { status: 401, code: 'unauthorized', message: 'the agent needs its token (Authorization: Bearer <token>)' };

/** The refusal of `request`, or undefined when it carries `token` and comes from no web page. */
export function accessRefusal(request: IncomingMessage, token: string): Refusal | undefined {
  return originRefusal(request) ?? (bearerMatches(request.headers.authorization, token) ? undefined : UNAUTHORIZED);
}

/** A refused WebSocket upgrade: a plain HTTP answer, then the socket closes. */
export function refuseUpgrade(socket: Duplex, refusal: Refusal): void {
  const body = JSON.stringify({ code: refusal.code, message: refusal.message });
  const text = refusal.status === 401 ? 'Unauthorized' : 'Forbidden';
  socket.end(`HTTP/1.1 ${refusal.status} ${text}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
}
