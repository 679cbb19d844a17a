import { readFile } from 'node:fs/promises';
import { z } from 'zod';
import type { EgressRules } from '../../../../contract/egress.js';

/**
 * What the managed proxy types (datacenter, isp, residential, mobile) mean on a
 * self-hosted install: the operator lists upstream proxies and what each can serve. A
 * managed proxy is created only when some upstream matches its type and config.
 */
export const proxyUpstreamSchema = z.strictObject({
  name: z.string().min(1).max(100).optional().describe('A label for logs and errors'),
  types: z.array(z.enum(['datacenter', 'isp', 'residential', 'mobile'])).min(1),
  /** Upper-case ISO 3166 country codes this upstream serves; absent = any. */
  countries: z.array(z.string().regex(/^[A-Z]{2}$/)).optional(),
  /** Further config fields (city, state, zip, asn, os) and the values served; absent = any. */
  match: z.record(z.string(), z.array(z.string())).optional(),
  /** http(s)://[user:password@]host:port of the upstream forward proxy. */
  url: z.url({ protocol: /^https?$/ }),
});

export type ProxyUpstream = z.output<typeof proxyUpstreamSchema>;

export interface ProxySettings {
  upstreams: ProxyUpstream[];
  /** What a health check fetches through the proxy; it answers with the egress IP. */
  checkUrl: string;
  /** How long one check may take, connect to last byte (default 5000 ms). */
  checkTimeoutMs?: number;
  /**
   * Lets a caller-supplied check `url` point at loopback and private addresses. Only for
   * tests, whose check servers live on loopback; never set it on a real install.
   */
  allowPrivateCheckUrls?: boolean;
  /**
   * BROWSERPLANE_BLOCK_PRIVATE_NETWORKS and its allow list: a check does not connect to a
   * custom proxy on a loopback or private address (contract/egress.ts). Managed upstreams
   * are the operator's own and are not checked.
   */
  egress?: EgressRules;
}

export type ManagedProxyType = ProxyUpstream['types'][number];

/** What a managed proxy asks of an upstream. */
export interface UpstreamRequest {
  type: ManagedProxyType;
  protocol?: 'http' | 'https' | undefined;
  /** The proxy's config: country (upper case) and the other fields, as strings. */
  config: Record<string, string>;
}

/**
 * The stable handle a managed proxy keeps of its upstream: the upstream's name, or
 * scheme://host:port when it has none (never its credentials).
 */
export function upstreamKey(upstream: ProxyUpstream): string {
  if (upstream.name !== undefined) return upstream.name;
  const url = new URL(upstream.url);
  return `${url.protocol}//${url.host}`;
}

/** Whether an upstream can serve the request: type, protocol, country and every other field. */
export function upstreamServes(upstream: ProxyUpstream, request: UpstreamRequest): boolean {
  if (!upstream.types.includes(request.type)) return false;
  if (request.protocol !== undefined && new URL(upstream.url).protocol !== `${request.protocol}:`) return false;
  for (const [field, value] of Object.entries(request.config)) {
    const served = field === 'country' ? upstream.countries : upstream.match?.[field];
    if (served !== undefined && !served.some((v) => v.toLowerCase() === value.toLowerCase())) return false;
  }
  return true;
}

/** The first configured upstream that serves the request (configuration order is priority order). */
export function pickUpstream(upstreams: ProxyUpstream[], request: UpstreamRequest): ProxyUpstream | undefined {
  return upstreams.find((u) => upstreamServes(u, request));
}

export function findUpstreamByKey(upstreams: ProxyUpstream[], key: string): ProxyUpstream | undefined {
  return upstreams.find((u) => upstreamKey(u) === key);
}

/** Parses BROWSERPLANE_PROXY_UPSTREAMS (inline JSON) or the file BROWSERPLANE_PROXY_UPSTREAMS_FILE names. */
export async function loadProxyUpstreams(inline: string | undefined, file: string | undefined): Promise<ProxyUpstream[]> {
  const text = inline ?? (file ? await readFile(file, 'utf8') : undefined);
  if (text === undefined) return [];
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    // V8's message quotes the input, which may hold upstream credentials: keep only the position.
    const position = /position (\d+)/.exec((error as Error).message)?.[1];
    // eslint-disable-next-line preserve-caught-error -- the cause quotes the input too
    throw new Error(`proxy upstreams are not valid JSON${position ? ` (at position ${position})` : ''}`);
  }
  const result = z.array(proxyUpstreamSchema).safeParse(json);
  if (!result.success) {
    throw new Error(`proxy upstreams are invalid: ${result.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
  }
  const keys = new Set<string>();
  for (const upstream of result.data) {
    const key = upstreamKey(upstream);
    if (keys.has(key)) {
      throw new Error(`proxy upstreams are invalid: two upstreams are both known as ${JSON.stringify(key)}; give them distinct names`);
    }
    keys.add(key);
  }
  return result.data;
}
