import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import type { BrowserResetReport } from '../../contract/browser-runtime.js';
import type { RunningChromium } from './chromium.js';
import type { ConnectionTracker } from './connections.js';
import { sendJson } from './http-json.js';
import { endSessionProcesses } from './process/session-end.js';
import { supervisorLogs } from './logs/supervisor.js';
import { withBrowserCdp, type BrowserCdp } from './cdp/client.js';
import type { AgentState, ResetRequest } from './agent-state.js';
import type { AgentError, AgentResetReport } from '../../contract/agent-wire.js';
import { MAX_START_URL_LENGTH, plainResetRequest } from './plain-input.js';

/**
 * POST /reset: a pool browser released with reuse is made fit for its next holder, over
 * the agent's own CDP connection to Chromium (never a client's), in this order:
 *
 * 1. Every client connection of the previous holder (CDP, WebDriver BiDi, live view) is
 *    closed, and new ones are refused (503) until the reset ends, so the next holder
 *    never sees a half-reset browser and the previous one cannot undo it. Its processes
 *    are killed and forgotten (process/session-end.ts); its log streams end and the lines
 *    kept of the browser's own processes are forgotten (logs/supervisor.ts).
 * 2. Browser contexts other than the default one are disposed (with their pages and
 *    their in-memory storage); one about:blank page is opened in the default context and
 *    every other page there is closed. It is opened first: a headful Chromium exits when
 *    its last window closes.
 * 3. Once those pages are gone (an unload handler could still write), side by side:
 *    permissions and download behaviour go back to the defaults; cookies are cleared and
 *    the baseline is put back (the cookies Chromium had when it was ready, before any
 *    client connected: a profile's, none without a profile); the HTTP cache is cleared,
 *    and the web storage (localStorage, IndexedDB, service workers, Cache Storage, file
 *    systems, shared storage, storage buckets) of every origin that had a page, frame or
 *    worker open in the default context at reset time.
 * 4. The start URL, if any, opens in a new page, which replaces the about:blank one, as
 *    at launch: its load is not waited for. It opens last, so it never sees the previous
 *    holder's state.
 *
 * Not covered: storage of origins the previous holder visited but had no page open on at
 * release (Chromium cannot list the origins that hold data), history, HSTS, the DNS cache,
 * keep-alive sockets, and downloads in progress. A failed step fails the reset (409
 * reset_failed): the service then replaces the browser, whose state is unknown.
 */

export type { ResetRequest } from './agent-state.js';
export { MAX_START_URL_LENGTH };

const MAX_BODY_BYTES = 64 * 1024;

/** Everything Storage.clearDataForOrigin can clear but cookies, which the baseline replaces instead. */
const WEB_STORAGE_TYPES = 'file_systems,indexeddb,local_storage,websql,service_workers,cache_storage,shared_storage,storage_buckets,interest_groups';
/** Closed pages are gone from Target.getTargets within a few ms; this is for a busy machine. */
const PAGES_CLOSE_TIMEOUT_MS = 5000;

interface ErrorBody {
  code: string;
  message: string;
  details: { code: string; message: string; field?: string }[];
}

/** The request body as text (empty means no options; undefined, too large), checked; pure, so it is tested alone. */
export async function parseResetRequest(text: string | undefined): Promise<{ ok: true; request: ResetRequest } | { ok: false; error: ErrorBody }> {
  const invalid = (code: string, message: string, field?: string) => ({
    ok: false as const,
    error: { code: 'invalid_request', message: `The reset request is invalid: ${message}`, details: [{ code, message, ...(field ? { field } : {}) }] },
  });
  if (text === undefined) return invalid('too_large', `the body is larger than ${MAX_BODY_BYTES} bytes`);
  if (text.trim() === '') return { ok: true, request: {} };
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return invalid('invalid_json', 'the body is not JSON');
  }
  if (!body || typeof body !== 'object' || Array.isArray(body)) return invalid('invalid_type', 'the body must be a JSON object');
  // A plain body is read without zod (plain-input.ts); the schema, loaded then, judges the rest.
  const plain = plainResetRequest(body);
  const checked = plain ? { success: true as const, data: plain } : (await import('../../contract/agent-wire.js')).agentResetRequestSchema.safeParse(body);
  if (!checked.success) {
    // One detail: an unknown field first, as a misspelt start_url is the likelier mistake.
    const issue = checked.error.issues.find((candidate) => candidate.code === 'unrecognized_keys') ?? checked.error.issues[0]!;
    if (issue.code === 'unrecognized_keys') return invalid('unknown_field', `unknown field ${issue.keys.map((key) => JSON.stringify(key)).join(', ')}`, `body.${issue.keys[0]}`);
    if (issue.code === 'too_big') return invalid('too_long', `start_url is longer than ${MAX_START_URL_LENGTH} characters`, 'body.start_url');
    return invalid('invalid_type', 'start_url must be a string', 'body.start_url');
  }
  const startUrl = checked.data.start_url;
  if (startUrl === undefined) return { ok: true, request: {} };
  if (startUrl === 'about:blank') return { ok: true, request: { startUrl } };
  let url: URL;
  try {
    url = new URL(startUrl);
  } catch {
    return invalid('invalid_url', 'start_url is not a URL', 'body.start_url');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return invalid('invalid_url', 'start_url must be an http(s) URL or about:blank', 'body.start_url');
  return { ok: true, request: { startUrl: url.href } };
}

export async function handleResetRequest(state: AgentState, request: IncomingMessage, response: ServerResponse): Promise<void> {
  const parsed = await parseResetRequest(await readBody(request));
  if (!parsed.ok) return sendJson(response, 400, parsed.error);
  let report: BrowserResetReport;
  try {
    report = await state.reset(parsed.request);
  } catch (error) {
    return sendJson(response, 409, { code: 'reset_failed', message: error instanceof Error ? error.message : String(error) } satisfies AgentError);
  }
  sendJson(response, 200, {
    closed_connections: report.closedConnections,
    closed_targets: report.closedTargets,
    disposed_contexts: report.disposedContexts,
    cookies_restored: report.cookiesRestored,
  } satisfies AgentResetReport);
}

/** The body as text; undefined when it is larger than any valid request (read to the end, so the 400 reaches the client). */
async function readBody(request: IncomingMessage): Promise<string | undefined> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size <= MAX_BODY_BYTES) chunks.push(chunk);
  }
  return size > MAX_BODY_BYTES ? undefined : Buffer.concat(chunks).toString('utf8');
}

/** A cookie as Storage.getCookies returns it (the fields the reset uses). */
export interface CdpCookie {
  name: string;
  value: string;
  domain: string;
  path: string;
  expires: number;
  httpOnly: boolean;
  secure: boolean;
  session: boolean;
  sameSite?: string;
  priority?: string;
  sourceScheme?: string;
  sourcePort?: number;
  partitionKey?: unknown;
  partitionKeyOpaque?: boolean;
}

/**
 * The browser's cookies now, for the baseline; the agent calls it before any client can
 * connect. On the pipe's own session: one round trip to Chromium, where a connection of
 * its own took three (attach, read, detach), and clients' upgrades wait for it.
 */
export async function captureCookies(chromium: RunningChromium): Promise<CdpCookie[]> {
  return (await chromium.cdp.command<{ cookies: CdpCookie[] }>('Storage.getCookies')).cookies;
}

export interface ResetTarget {
  chromium: RunningChromium;
  connections: ConnectionTracker;
  /** The cookies to put back; undefined when they could not be read at start (no reset then). */
  cookieBaseline: CdpCookie[] | undefined;
  log: Logger;
}

export async function resetBrowser(target: ResetTarget, request: ResetRequest): Promise<BrowserResetReport> {
  const { chromium, connections, cookieBaseline, log } = target;
  const started = Date.now();
  const resume = connections.holdNewConnections();
  try {
    if (!cookieBaseline) throw new Error('the cookies the browser started with could not be read at start, so they cannot be put back');
    const closedConnections = connections.closeAll();
    await endSessionProcesses();
    supervisorLogs.resetForNextHolder();
    const steps = await withBrowserCdp(chromium.cdp, (cdp) => resetOver(cdp, cookieBaseline, request.startUrl ?? 'about:blank'));
    const report = { closedConnections, ...steps };
    log.info({ ms: Date.now() - started, ...report, start_url: request.startUrl }, 'browser reset for its next holder');
    return report;
  } catch (error) {
    log.error({ err: error, ms: Date.now() - started }, 'browser reset failed: the service replaces the browser');
    throw error;
  } finally {
    resume();
  }
}

interface TargetInfo {
  targetId: string;
  type: string;
  url: string;
  browserContextId?: string;
}

async function resetOver(cdp: BrowserCdp, baseline: CdpCookie[], startUrl: string): Promise<Omit<BrowserResetReport, 'closedConnections'>> {
  const { targetInfos } = await cdp.send<{ targetInfos: TargetInfo[] }>('Target.getTargets');
  const { browserContextIds, defaultBrowserContextId } = await cdp.send<{ browserContextIds: string[]; defaultBrowserContextId: string }>(
    'Target.getBrowserContexts',
  );
  const inDefault = targetInfos.filter((info) => info.browserContextId === defaultBrowserContextId);
  const origins = webOrigins(inDefault);
  const pages = targetInfos.filter((info) => info.type === 'page');
  const { targetId: blank } = await cdp.send<{ targetId: string }>('Target.createTarget', { url: 'about:blank' });
  await Promise.all(inDefault.filter((info) => info.type === 'page').map((page) => closeTarget(cdp, page.targetId)));
  for (const browserContextId of browserContextIds) await disposeContext(cdp, browserContextId);
  await waitUntilClosed(cdp, new Set(pages.map((page) => page.targetId)));
  // Independent of each other: together, they take as long as the slowest (cache, cookies).
  const [, cookiesRestored] = await Promise.all([
    cdp.send('Browser.resetPermissions').then(() => cdp.send('Browser.setDownloadBehavior', { behavior: 'default' })),
    restoreCookies(cdp, baseline),
    clearCacheAndStorage(cdp, blank, origins),
  ]);
  if (startUrl !== 'about:blank') {
    await cdp.send('Target.createTarget', { url: startUrl });
    await closeTarget(cdp, blank);
  }
  return { closedTargets: pages.length, disposedContexts: browserContextIds.length, cookiesRestored };
}

/** Returns how many cookies were put back. */
async function restoreCookies(cdp: BrowserCdp, baseline: CdpCookie[]): Promise<number> {
  await cdp.send('Storage.clearCookies');
  const restored = restorableCookies(baseline, Date.now());
  if (restored.length > 0) await cdp.send('Storage.setCookies', { cookies: restored });
  return restored.length;
}

/**
 * The HTTP cache and per-origin storage are only reachable from a page's session: the new
 * blank page's, attached to as a flat session (it goes when the reset's connection does).
 */
async function clearCacheAndStorage(cdp: BrowserCdp, blank: string, origins: string[]): Promise<void> {
  const { sessionId } = await cdp.send<{ sessionId: string }>('Target.attachToTarget', { targetId: blank, flatten: true });
  await Promise.all([
    cdp.send('Network.clearBrowserCache', {}, sessionId),
    ...origins.map((origin) => cdp.send('Storage.clearDataForOrigin', { origin, storageTypes: WEB_STORAGE_TYPES }, sessionId)),
  ]);
  await cdp.send('Target.detachFromTarget', { sessionId });
}

/** Origins of web pages, frames and workers; about:, data:, chrome: and the like hold no storage to clear. */
export function webOrigins(targets: { url: string }[]): string[] {
  const origins = new Set<string>();
  for (const { url } of targets) {
    let origin: string;
    try {
      origin = new URL(url).origin;
    } catch {
      continue;
    }
    if (/^https?:\/\//.test(origin)) origins.add(origin);
  }
  return [...origins].sort();
}

/** A page that closed by itself meanwhile is what was wanted. */
async function closeTarget(cdp: BrowserCdp, targetId: string): Promise<void> {
  try {
    await cdp.send('Target.closeTarget', { targetId });
  } catch (error) {
    if (!/no target with given id/i.test(error instanceof Error ? error.message : '')) throw error;
  }
}

/**
 * Chromium disposes a context created with disposeOnDetach (Playwright's) by itself when
 * its client's connection closes, which races with this reset: either way it is gone.
 */
async function disposeContext(cdp: BrowserCdp, browserContextId: string): Promise<void> {
  try {
    await cdp.send('Target.disposeBrowserContext', { browserContextId });
  } catch (error) {
    if (!/failed to find context/i.test(error instanceof Error ? error.message : '')) throw error;
  }
}

/** Storage is cleared only once no closed page is left to write to it (an unload handler could). */
async function waitUntilClosed(cdp: BrowserCdp, closed: Set<string>): Promise<void> {
  const deadline = Date.now() + PAGES_CLOSE_TIMEOUT_MS;
  for (;;) {
    const { targetInfos } = await cdp.send<{ targetInfos: TargetInfo[] }>('Target.getTargets');
    const left = targetInfos.filter((info) => closed.has(info.targetId)).length;
    if (left === 0) return;
    if (Date.now() > deadline) throw new Error(`${left} page(s) were still open ${PAGES_CLOSE_TIMEOUT_MS} ms after they were closed`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/**
 * The baseline as Storage.setCookies takes it: expired cookies left out, and those with
 * an opaque partition key too (they cannot be set). A session cookie has no expiry.
 */
export function restorableCookies(baseline: CdpCookie[], now: number): Record<string, unknown>[] {
  return baseline
    .filter((cookie) => !cookie.partitionKeyOpaque && (cookie.session || cookie.expires * 1000 > now))
    .map((cookie) => ({
      name: cookie.name,
      value: cookie.value,
      domain: cookie.domain,
      path: cookie.path,
      secure: cookie.secure,
      httpOnly: cookie.httpOnly,
      ...(cookie.session ? {} : { expires: cookie.expires }),
      ...(cookie.sameSite ? { sameSite: cookie.sameSite } : {}),
      ...(cookie.priority ? { priority: cookie.priority } : {}),
      ...(cookie.sourceScheme ? { sourceScheme: cookie.sourceScheme } : {}),
      ...(cookie.sourcePort !== undefined ? { sourcePort: cookie.sourcePort } : {}),
      ...(cookie.partitionKey !== undefined ? { partitionKey: cookie.partitionKey } : {}),
    }));
}
