import { errors, type Page, type Request } from 'playwright-core';

export interface SettleResult {
  /** False when the timeout passed first; the page may still be loading or changing. */
  settled: boolean;
  url: string;
}

/** DOM quiet this long counts as "done changing". */
const QUIET_MS = 300;
/**
 * A request still open after this long is treated as background traffic (long-poll,
 * analytics) rather than the answer to the step; without the cut-off such a page
 * would only ever settle by timeout.
 */
const BACKGROUND_REQUEST_MS = 5_000;
const POLL_MS = 50;
const TRACKED_TYPES = new Set(['document', 'xhr', 'fetch']);

/** The main frame's open navigations and XHR/fetch requests, and a counter bumped by any traffic or navigation. */
interface Traffic {
  open: Map<Request, number>;
  activity: number;
}

const trafficByPage = new WeakMap<Page, Traffic>();

/**
 * Starts (once per page, for the page's lifetime) tracking its main-frame traffic. Every
 * action of the page model calls this before it acts, so a fetch or navigation that a
 * click starts is already known to a waitForSettled called after the click returns.
 */
export function trackTraffic(page: Page): void {
  trafficOf(page);
}

function trafficOf(page: Page): Traffic {
  const known = trafficByPage.get(page);
  if (known) return known;
  const traffic: Traffic = { open: new Map(), activity: 0 };
  trafficByPage.set(page, traffic);
  const isTracked = (request: Request) => {
    try {
      return request.frame() === page.mainFrame() && TRACKED_TYPES.has(request.resourceType());
    } catch {
      return false; // service-worker requests have no frame
    }
  };
  page.on('request', (request) => {
    if (!isTracked(request)) return;
    traffic.open.set(request, Date.now());
    traffic.activity++;
  });
  const done = (request: Request) => {
    if (traffic.open.delete(request)) traffic.activity++;
  };
  page.on('requestfinished', done);
  page.on('requestfailed', done);
  page.on('framenavigated', (frame) => {
    if (frame === page.mainFrame()) traffic.activity++;
  });
  return traffic;
}

/**
 * Resolves once the page is quiet, or after `timeoutMs` with `settled: false`; never
 * throws on timeout. Quiet means: no navigation or XHR/fetch of the main frame open
 * (younger than BACKGROUND_REQUEST_MS), the current document reached DOMContentLoaded,
 * and the DOM then stayed unchanged for QUIET_MS with no new traffic meanwhile. A
 * navigation during the quiet check restarts the loop, which is how redirects and SPAs
 * that fetch and then re-render are followed. Playwright's own click and press already
 * wait for a navigation they start to commit; this adds everything else.
 */
export async function waitForSettled(page: Page, timeoutMs = 10_000): Promise<SettleResult> {
  const traffic = trafficOf(page);
  const busy = () => [...traffic.open.values()].some((since) => Date.now() - since < BACKGROUND_REQUEST_MS);
  const deadline = Date.now() + timeoutMs;
  const left = () => Math.max(0, deadline - Date.now());
  while (left() > 0) {
    if (busy()) {
      await sleep(Math.min(POLL_MS, left()));
      continue;
    }
    const mark = traffic.activity;
    const quiet = await quietDocument(page, left());
    if (quiet === 'timeout') break;
    if (quiet === 'quiet' && traffic.activity === mark && !busy()) return { settled: true, url: page.url() };
  }
  return { settled: false, url: page.url() };
}

/** 'replaced' when the document went away mid-check (a navigation): the caller loops. */
async function quietDocument(page: Page, timeoutMs: number): Promise<'quiet' | 'timeout' | 'replaced'> {
  try {
    await page.waitForLoadState('domcontentloaded', { timeout: timeoutMs });
    const quiet = await page.evaluate(domQuietInPage, { quietMs: QUIET_MS, maxMs: timeoutMs });
    return quiet ? 'quiet' : 'timeout';
  } catch (error) {
    if (error instanceof errors.TimeoutError) return 'timeout';
    if (isDocumentReplaced(error)) return 'replaced';
    throw error;
  }
}

const isDocumentReplaced = (error: unknown) =>
  error instanceof Error && /Execution context was destroyed|Cannot find context|frame was detached/i.test(error.message);

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface MutationObserverLike {
  observe(target: unknown, options: Record<string, boolean>): void;
  disconnect(): void;
}
interface QuietGlobals {
  document: { documentElement: unknown };
  MutationObserver: new (callback: () => void) => MutationObserverLike;
}

/** In the page: true once no DOM mutation happened for `quietMs`, false if that never happens within `maxMs`. */
function domQuietInPage({ quietMs, maxMs }: { quietMs: number; maxMs: number }): Promise<boolean> {
  const { document, MutationObserver } = globalThis as unknown as QuietGlobals;
  return new Promise((resolve) => {
    let quietTimer = setTimeout(() => finish(true), quietMs);
    const limit = setTimeout(() => finish(false), maxMs);
    const observer = new MutationObserver(() => {
      clearTimeout(quietTimer);
      quietTimer = setTimeout(() => finish(true), quietMs);
    });
    observer.observe(document.documentElement, { subtree: true, childList: true, attributes: true, characterData: true });
    function finish(quiet: boolean) {
      observer.disconnect();
      clearTimeout(quietTimer);
      clearTimeout(limit);
      resolve(quiet);
    }
  });
}
