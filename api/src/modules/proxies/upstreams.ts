import { readFile } from 'node:fs/promises';
import { z } from 'zod';

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
}

/** Parses BROWSERPLANE_PROXY_UPSTREAMS (inline JSON) or the file BROWSERPLANE_PROXY_UPSTREAMS_FILE names. */
export async function loadProxyUpstreams(inline: string | undefined, file: string | undefined): Promise<ProxyUpstream[]> {
  const text = inline ?? (file ? await readFile(file, 'utf8') : undefined);
  if (text === undefined) return [];
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    throw new Error(`proxy upstreams are not valid JSON: ${(error as Error).message}`, { cause: error });
  }
  const result = z.array(proxyUpstreamSchema).safeParse(json);
  if (!result.success) {
    throw new Error(`proxy upstreams are invalid: ${result.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
  }
  return result.data;
}
