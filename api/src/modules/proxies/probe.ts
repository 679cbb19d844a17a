import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import { ProxyAgent, request } from 'undici';
import { badRequest } from '../../http/errors.js';
import { isRefusedAddress, type EgressRules } from '../../../../contract/egress.js';

/** Where a check connects: the proxy itself, credentials kept apart from the URI. */
export interface ProxyEndpoint {
  /** scheme://host:port, never with credentials (it may end up in an error message). */
  uri: string;
  /** TLS server name of an https proxy whose uri was pinned to an address (pinProxyEndpoint). */
  servername?: string | undefined;
  username?: string | undefined;
  password?: string | undefined;
}

/** What a check fetches through the proxy. */
export interface ProbeTarget {
  url: string;
  /** Host header when `url` was pinned to an address; else the URL's own. */
  host?: string;
  /** TLS server name when `url` was pinned to an address. */
  servername?: string;
}

export type ProbeResult = { statusCode: number; body: string } | { error: string };

const BODY_LIMIT = 256;

/**
 * One GET through the proxy: absolute-form for http targets, a CONNECT tunnel for https.
 * Never throws for network trouble: a proxy that cannot be reached is a result.
 */
export async function probeThroughProxy(endpoint: ProxyEndpoint, target: ProbeTarget, timeoutMs: number): Promise<ProbeResult> {
  const token =
    endpoint.username !== undefined || endpoint.password !== undefined
      ? `Basic ${Buffer.from(`${endpoint.username ?? ''}:${endpoint.password ?? ''}`).toString('base64')}`
      : undefined;
  const agent = new ProxyAgent({
    uri: endpoint.uri,
    ...(token ? { token } : {}),
    proxyTunnel: false,
    ...(endpoint.servername ? { proxyTls: { servername: endpoint.servername } } : {}),
    ...(target.servername ? { requestTls: { servername: target.servername } } : {}),
  });
  try {
    const res = await request(target.url, {
      dispatcher: agent,
      method: 'GET',
      headers: { 'user-agent': 'browserplane-proxy-check', ...(target.host ? { host: target.host } : {}) },
      signal: AbortSignal.timeout(timeoutMs),
    });
    return { statusCode: res.statusCode, body: await readCapped(res.body, BODY_LIMIT) };
  } catch (error) {
    return { error: describeError(error) };
  } finally {
    agent.destroy().catch(() => undefined);
  }
}

async function readCapped(body: AsyncIterable<Buffer> & { destroy(): unknown }, limit: number): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    chunks.push(chunk);
    size += chunk.length;
    if (size >= limit) {
      body.destroy();
      break;
    }
  }
  return Buffer.concat(chunks).subarray(0, limit).toString('utf8');
}

/** A short reason for the log: the error's code and message, nothing from the request. */
function describeError(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const code = (error as { code?: unknown }).code;
  const cause = error.cause instanceof Error ? `: ${error.cause.message}` : '';
  return `${typeof code === 'string' ? code + ' ' : ''}${error.name}: ${error.message}${cause}`;
}

/** The egress IP a check URL answered with, when the answer is one. */
export function egressIp(body: string): string | null {
  const text = body.trim();
  return isIP(text) ? text : null;
}

/** Public unicast only: loopback, private, link-local, CGNAT, multicast, reserved and embedded-v4 forms are refused. */
export function isPublicAddress(address: string): boolean {
  return !isRefusedAddress({ blockPrivate: true, allowed: [] }, address);
}

/**
 * Resolves a caller-supplied URL and pins it to one of its addresses, so the proxy
 * cannot be pointed at internal services (directly or by a DNS answer that changes
 * between this check and the connect): every address must be public.
 */
export async function pinPublicTarget(raw: string, options: { allowPrivate: boolean }): Promise<ProbeTarget> {
  const url = new URL(raw);
  if (url.username || url.password) {
    throw badRequest('invalid_request', 'The check url must not carry credentials', [
      { code: 'invalid_url', field: 'body.url', message: 'body.url: must not carry credentials' },
    ]);
  }
  const hostname = url.hostname.replace(/^\[(.*)\]$/, '$1');
  let addresses: string[];
  try {
    addresses = (await lookup(hostname, { all: true, verbatim: true })).map((a) => a.address);
  } catch {
    throw badRequest('invalid_request', `The check url's host ${JSON.stringify(hostname)} does not resolve`, [
      { code: 'unresolvable_host', field: 'body.url', message: 'body.url: the host does not resolve' },
    ]);
  }
  const refused = addresses.filter((a) => !isPublicAddress(a));
  if (!options.allowPrivate && (refused.length > 0 || addresses.length === 0)) {
    throw badRequest(
      'invalid_request',
      `The check url must resolve to public addresses only; ${JSON.stringify(hostname)} resolves to ${refused.join(', ') || 'nothing'}`,
      [{ code: 'forbidden_address', field: 'body.url', message: 'body.url: must resolve to public IP addresses only' }],
    );
  }
  const address = addresses[0]!;
  if (isIP(hostname)) return { url: url.href };
  const pinned = new URL(url.href);
  pinned.hostname = isIP(address) === 6 ? `[${address}]` : address;
  return {
    url: pinned.href,
    host: url.host,
    ...(url.protocol === 'https:' ? { servername: hostname } : {}),
  };
}

/**
 * With private networks blocked: resolves the proxy's host once, refuses it (400) when any
 * address is refused, and pins the endpoint to the checked address so that the connect
 * cannot go elsewhere (DNS rebinding). A host that does not resolve is left to fail the check.
 */
export async function pinProxyEndpoint(endpoint: ProxyEndpoint, rules: EgressRules): Promise<ProxyEndpoint> {
  if (!rules.blockPrivate) return endpoint;
  const url = new URL(endpoint.uri);
  const hostname = url.hostname.replace(/^\[(.*)\]$/, '$1');
  const addresses = await lookup(hostname, { all: true, verbatim: true }).then(
    (found) => found.map((a) => a.address),
    () => undefined,
  );
  if (!addresses) return endpoint;
  const refused = addresses.filter((address) => isRefusedAddress(rules, address));
  if (refused.length > 0) {
    throw badRequest(
      'invalid_request',
      `The proxy's host ${JSON.stringify(hostname)} is a loopback, private or link-local address (${refused.join(', ')}), which this service does not connect to (BROWSERPLANE_BLOCK_PRIVATE_NETWORKS)`,
      [{ code: 'forbidden_address', field: 'config.host', message: 'config.host: must resolve to public IP addresses only' }],
    );
  }
  if (isIP(hostname) || addresses.length === 0) return endpoint;
  const pinned = new URL(endpoint.uri);
  pinned.hostname = isIP(addresses[0]!) === 6 ? `[${addresses[0]}]` : addresses[0]!;
  return { ...endpoint, uri: `${pinned.protocol}//${pinned.host}`, ...(url.protocol === 'https:' ? { servername: hostname } : {}) };
}
