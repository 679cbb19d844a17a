import type { CdpMux } from '../cdp/mux.js';
import { openEventedCdp } from './cdp-session.js';
import { Exchange } from './exchange.js';
import { CurlError, type CurlAnswer, type CurlRequest } from './request.js';

/**
 * A request made by the browser itself, so it carries what the browser has: the session's
 * proxy (through the agent's forwarder, which also applies the private-network block),
 * its cookies and TLS stack. Checked against Chromium 156:
 *
 * - The request is a navigation of a page created for it with Target.createTarget
 *   `hidden: true`: no tab, type "other" in Target.getTargets (so CDP clients such as
 *   Playwright, which follow pages, never see it), and gone with the agent connection
 *   that made it. A navigation, not fetch() from a page: fetch() from about:blank to a
 *   loopback or private host fails (Local Network Access), and CORS, mixed content and
 *   forbidden headers all apply to it. A navigation the browser starts is the request a
 *   user typing the URL makes: every cookie of the default context goes, SameSite=Strict
 *   ones too.
 * - Fetch interception on that page only rewrites method, headers and body at the request
 *   stage and reads status, headers and body at the response stage, after which the load
 *   is aborted. Redirects are therefore answered, not followed.
 * - Network.setCacheDisabled and setBypassServiceWorker: the answer always comes from the
 *   network, never the HTTP cache or a site's service worker.
 * - The deadline closes the agent's CDP connection, which closes the hidden page and with
 *   it the request in flight.
 */

/** `stop`: aborting it ends the request with its reason (a CurlError), as the deadline does. */
export async function curlThroughBrowser(mux: CdpMux, request: CurlRequest, stop: AbortSignal): Promise<CurlAnswer> {
  const started = performance.now();
  const cdp = await openEventedCdp(mux);
  let timer: NodeJS.Timeout | undefined;
  let onStop: (() => void) | undefined;
  const stopped = new Promise<never>((_, reject) => {
    const end = (error: CurlError) => {
      reject(error);
      cdp.close(error);
    };
    timer = setTimeout(() => end(new CurlError(504, 'curl_timeout', `No complete answer within timeout_ms (${request.timeoutMs} ms); the request was cancelled`)), request.timeoutMs);
    onStop = () => end(stop.reason as CurlError);
    if (stop.aborted) onStop();
    else stop.addEventListener('abort', onStop, { once: true });
  });
  stopped.catch(() => undefined);
  try {
    const work = async () => {
      const { targetId } = await cdp.send<{ targetId: string }>('Target.createTarget', { url: 'about:blank', hidden: true });
      const { sessionId } = await cdp.send<{ sessionId: string }>('Target.attachToTarget', { targetId, flatten: true });
      const exchange = new Exchange(cdp, sessionId, request);
      // No response bodies kept by Network: the body is read once, as a stream.
      await cdp.send('Network.enable', { maxTotalBufferSize: 0, maxResourceBufferSize: 0 }, sessionId);
      await cdp.send('Network.setCacheDisabled', { cacheDisabled: true }, sessionId);
      // A site's service worker would otherwise answer the navigation itself, out of our page's Fetch.
      await cdp.send('Network.setBypassServiceWorker', { bypass: true }, sessionId);
      await cdp.send('Fetch.enable', { patterns: [{ urlPattern: '*', requestStage: 'Request' }, { urlPattern: '*', requestStage: 'Response' }] }, sessionId);
      cdp.send<{ errorText?: string }>('Page.navigate', { url: request.url }, sessionId).then(
        (navigation) => {
          if (navigation.errorText) exchange.navigationFailed(navigation.errorText);
        },
        (error: unknown) => exchange.fail(error),
      );
      return exchange.result;
    };
    const result = await Promise.race([work(), stopped]);
    return {
      status: result.status,
      headers: result.headers,
      body: result.body.toString(request.responseEncoding === 'base64' ? 'base64' : 'utf8'),
      duration_ms: Math.round(performance.now() - started),
    };
  } finally {
    clearTimeout(timer);
    if (onStop) stop.removeEventListener('abort', onStop);
    cdp.close();
  }
}
