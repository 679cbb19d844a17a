import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import { Agent, request, type Dispatcher } from 'undici';
import { z } from 'zod';
import { isRefusedAddress, type EgressRules } from '../../../../contract/egress.js';

/**
 * A client of 1Password Connect's REST API (developer.1password.com/docs/connect/api-reference):
 * Bearer-token GETs of /v1/vaults, /v1/vaults/{vault}/items[?filter=] and
 * /v1/vaults/{vault}/items/{item}. Every call is bounded (timeout, answer size) and, with
 * BROWSERPLANE_BLOCK_PRIVATE_NETWORKS, connects only to an address the egress rules allow,
 * pinned so that a second DNS answer cannot send it elsewhere. The token goes in the
 * Authorization header only, never into a URL, an error or a log line.
 */

export interface ConnectServer {
  /** Base URL, e.g. http://onepassword-connect:8080 (without /v1). */
  url: string;
  token: string;
}

export interface ConnectLimits {
  timeoutMs: number;
  maxResponseBytes: number;
  egress?: EgressRules | undefined;
}

/** Why a call failed, in words fit for a caller: never the token, never a response body beyond Connect's own message. */
export class ConnectError extends Error {
  constructor(
    message: string,
    readonly reason: 'unauthorized' | 'forbidden' | 'not_found' | 'unreachable' | 'bad_answer' | 'refused_address',
  ) {
    super(message);
    this.name = 'ConnectError';
  }
}

const connectErrorBody = z.object({ status: z.number().optional(), message: z.string().optional() });

export const vaultSchema = z.object({ id: z.string(), name: z.string() });
export const itemSummarySchema = z.object({
  id: z.string(),
  title: z.string().default(''),
  vault: z.object({ id: z.string() }),
  category: z.string().optional(),
  urls: z.array(z.object({ href: z.string(), primary: z.boolean().optional(), label: z.string().optional() })).optional(),
});
export const itemFieldSchema = z.object({
  id: z.string(),
  type: z.string().optional(),
  purpose: z.string().optional(),
  label: z.string().optional(),
  value: z.string().optional(),
  totp: z.string().optional(),
});
export const fullItemSchema = itemSummarySchema.extend({ fields: z.array(itemFieldSchema).optional() });

export type ConnectVault = z.output<typeof vaultSchema>;
export type ConnectItemSummary = z.output<typeof itemSummarySchema>;
export type ConnectItem = z.output<typeof fullItemSchema>;

/** A SCIM string literal as Connect's filters take it: quotes and backslashes escaped. */
export const scimString = (text: string) => `"${text.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`;

export async function listVaults(server: ConnectServer, limits: ConnectLimits): Promise<ConnectVault[]> {
  return connectGet(server, '/v1/vaults', limits, z.array(vaultSchema));
}

export async function listVaultItems(server: ConnectServer, vaultId: string, limits: ConnectLimits, filter?: string): Promise<ConnectItemSummary[]> {
  const query = filter === undefined ? '' : `?filter=${encodeURIComponent(filter)}`;
  return connectGet(server, `/v1/vaults/${encodeURIComponent(vaultId)}/items${query}`, limits, z.array(itemSummarySchema));
}

export async function getItem(server: ConnectServer, vaultId: string, itemId: string, limits: ConnectLimits): Promise<ConnectItem> {
  return connectGet(server, `/v1/vaults/${encodeURIComponent(vaultId)}/items/${encodeURIComponent(itemId)}`, limits, fullItemSchema);
}

async function connectGet<T>(server: ConnectServer, path: string, limits: ConnectLimits, schema: z.ZodType<T>): Promise<T> {
  const target = await pinnedTarget(new URL(path.replace(/^\//, ''), withSlash(server.url)), limits.egress);
  let res: Dispatcher.ResponseData;
  try {
    res = await request(target.url, {
      method: 'GET',
      headers: { authorization: `Bearer ${server.token}`, accept: 'application/json', 'user-agent': 'browserplane', ...(target.host ? { host: target.host } : {}) },
      signal: AbortSignal.timeout(limits.timeoutMs),
      ...(target.dispatcher ? { dispatcher: target.dispatcher } : {}),
    });
  } catch (error) {
    await target.dispatcher?.destroy().catch(() => undefined);
    throw new ConnectError(`The 1Password Connect server at ${server.url} could not be reached: ${describe(error)}`, 'unreachable');
  }
  try {
    const text = await readCapped(res.body, limits.maxResponseBytes, server.url).catch((error: unknown) => {
      // The timeout also covers the body: a server that stalls mid-answer is unreachable, not an internal error.
      if (error instanceof ConnectError) throw error;
      throw new ConnectError(`The 1Password Connect server at ${server.url} broke off its answer: ${describe(error)}`, 'unreachable');
    });
    if (res.statusCode < 200 || res.statusCode > 299) throw statusError(res.statusCode, text, server.url);
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      throw new ConnectError(`The 1Password Connect server at ${server.url} answered with something other than JSON`, 'bad_answer');
    }
    const parsed = schema.safeParse(json);
    if (!parsed.success) throw new ConnectError(`The 1Password Connect server at ${server.url} answered in an unexpected shape`, 'bad_answer');
    return parsed.data;
  } finally {
    await target.dispatcher?.destroy().catch(() => undefined);
  }
}

const withSlash = (url: string) => (url.endsWith('/') ? url : `${url}/`);

function statusError(status: number, text: string, url: string): ConnectError {
  let said: string | undefined;
  try {
    said = connectErrorBody.parse(JSON.parse(text)).message;
  } catch {
    said = undefined;
  }
  const detail = said ? `: ${said.slice(0, 200)}` : '';
  if (status === 401) return new ConnectError(`1Password Connect refused the token (401${detail})`, 'unauthorized');
  if (status === 403) return new ConnectError(`1Password Connect denied access (403${detail})`, 'forbidden');
  if (status === 404) return new ConnectError(`1Password Connect found no such vault or item (404${detail})`, 'not_found');
  return new ConnectError(`The 1Password Connect server at ${url} answered ${status}${detail}`, 'bad_answer');
}

async function readCapped(body: Dispatcher.ResponseData['body'], limit: number, url: string): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limit) {
      body.destroy();
      throw new ConnectError(`The 1Password Connect server at ${url} answered with more than ${limit} bytes`, 'bad_answer');
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

interface Target {
  url: string;
  host?: string;
  dispatcher?: Agent;
}

/**
 * With private networks blocked, the server's host is resolved once, refused when any
 * address is, and the request pinned to the checked address (Host header and TLS server
 * name kept). Without the block, the request goes as it is.
 */
async function pinnedTarget(url: URL, egress: EgressRules | undefined): Promise<Target> {
  if (!egress?.blockPrivate) return { url: url.href };
  const hostname = url.hostname.replace(/^\[(.*)\]$/, '$1');
  const addresses = isIP(hostname)
    ? [hostname]
    : await lookup(hostname, { all: true, verbatim: true }).then(
        (found) => found.map((a) => a.address),
        () => {
          throw new ConnectError(`The 1Password Connect server's host ${JSON.stringify(hostname)} does not resolve`, 'unreachable');
        },
      );
  const refused = addresses.filter((address) => isRefusedAddress(egress, address));
  if (refused.length > 0 || addresses.length === 0) {
    throw new ConnectError(
      `The 1Password Connect server's host ${JSON.stringify(hostname)} is a loopback, private or link-local address (${refused.join(', ')}), which this service does not connect to (BROWSERPLANE_BLOCK_PRIVATE_NETWORKS; list it in BROWSERPLANE_ALLOWED_PRIVATE_NETWORKS)`,
      'refused_address',
    );
  }
  if (isIP(hostname)) return { url: url.href };
  const pinned = new URL(url.href);
  pinned.hostname = isIP(addresses[0]!) === 6 ? `[${addresses[0]}]` : addresses[0]!;
  return {
    url: pinned.href,
    host: url.host,
    ...(url.protocol === 'https:' ? { dispatcher: new Agent({ connect: { servername: hostname } }) } : {}),
  };
}

/** A short reason: the error's code and message, nothing from the request (which carries the token). */
function describe(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  if (error.name === 'TimeoutError' || error.name === 'AbortError') return 'timed out';
  const code = (error as { code?: unknown }).code;
  return `${typeof code === 'string' ? code + ' ' : ''}${error.message}`.slice(0, 200);
}
