import { answerHeaders, mergeRequestHeaders, type HeaderEntry } from './headers.js';
import { CURL_LIMITS, CurlError, type CurlRequest } from './request.js';
import type { CdpEvent, EventedCdp } from './cdp-session.js';

/**
 * One request followed through the hidden page's Fetch and Network events (see
 * through-browser.ts for why a navigation): the request stage gets the caller's method,
 * headers and body, the response stage gives status, headers and the body read as a
 * stream up to the cap; then the load is aborted, so nothing renders, runs or downloads.
 */

interface Paused {
  requestId: string;
  networkId?: string;
  resourceType: string;
  request: { url: string; headers: Record<string, string> };
  responseStatusCode?: number;
  responseStatusText?: string;
  responseErrorReason?: string;
  responseHeaders?: HeaderEntry[];
}

export interface ExchangeResult {
  status: number;
  headers: Record<string, string[]>;
  body: Buffer;
}

/**
 * What the forwarder (agent/src/proxy.ts) answers for a destination it refuses. Its
 * failures to reach a plain-http target come as proxy-chain's 590-599 statuses (594
 * Connection Refused, 593 for a name that does not resolve): not the target's answer, so
 * they are curl failures (https targets fail in Chromium instead, as net::ERR_...).
 */
const FORWARDER_REFUSAL = 'Browserplane refused to connect to ';
/** Set-Cookie comes only with Network's raw headers; they come before the body is read, this is for a busy machine. */
const RAW_HEADERS_GRACE_MS = 1000;
const READ_CHUNK_BYTES = 1024 * 1024;
const NO_BODY_STATUSES = new Set([204, 205, 304]);

export class Exchange {
  readonly result: Promise<ExchangeResult>;
  private settle!: { resolve: (result: ExchangeResult) => void; reject: (error: Error) => void };
  private settled = false;
  /** Network's id of our navigation, once its request stage was seen. */
  private networkId: string | undefined;
  private aborting = false;
  private rawHeaders: Record<string, string> | undefined;
  private rawHeadersCame: (() => void) | undefined;

  constructor(
    private readonly cdp: EventedCdp,
    private readonly sessionId: string,
    private readonly request: CurlRequest,
  ) {
    this.result = new Promise((resolve, reject) => (this.settle = { resolve, reject }));
    cdp.onEvent((event) => {
      if (event.sessionId === this.sessionId) this.handle(event).catch((error: unknown) => this.fail(error));
    });
  }

  /** Page.navigate's own error: the navigation ended before its request got out (a policy, a bad URL). */
  navigationFailed(errorText: string): void {
    if (!this.aborting) this.fail(new CurlError(502, 'curl_failed', `The request failed in the browser: ${errorText}`));
  }

  /** A failure seen outside the events (the navigation itself, the connection). */
  fail(error: unknown): void {
    if (this.settled) return;
    this.settled = true;
    this.settle.reject(error instanceof Error ? error : new Error(String(error)));
  }

  private async handle(event: CdpEvent): Promise<void> {
    if (event.method === 'Network.responseReceivedExtraInfo' && event.params.requestId === this.networkId) {
      this.rawHeaders = event.params.headers as Record<string, string>;
      this.rawHeadersCame?.();
      return;
    }
    if (event.method === 'Network.loadingFailed' && event.params.requestId === this.networkId && !this.aborting) {
      return this.fail(new CurlError(502, 'curl_failed', `The request failed in the browser: ${String(event.params.errorText)}`));
    }
    if (event.method !== 'Fetch.requestPaused') return;
    const paused = event.params as unknown as Paused;
    const send = (method: string, params: Record<string, unknown>) => this.cdp.send(method, { requestId: paused.requestId, ...params }, this.sessionId);
    // The hidden page loads nothing but our navigation; anything else is not let out.
    const ours = this.networkId !== undefined && (paused.networkId ?? paused.requestId) === this.networkId;
    if (paused.responseStatusCode === undefined && paused.responseErrorReason === undefined) {
      if (this.networkId !== undefined || paused.resourceType !== 'Document') return void (await send('Fetch.failRequest', { errorReason: 'Aborted' }));
      this.networkId = paused.networkId ?? paused.requestId;
      const { method, headers, body } = this.request;
      await send('Fetch.continueRequest', {
        method,
        headers: mergeRequestHeaders(paused.request.headers, headers),
        ...(body !== undefined ? { postData: Buffer.from(body, 'utf8').toString('base64') } : {}),
        interceptResponse: true,
      });
      return;
    }
    if (!ours) return void (await send('Fetch.failRequest', { errorReason: 'Aborted' }));
    // A network error: let it go on, so Network.loadingFailed names it (net::ERR_...).
    if (paused.responseErrorReason !== undefined) return void (await send('Fetch.continueRequest', {}));
    const status = paused.responseStatusCode!;
    // Settled before the abort, whose own failure (ERR_ABORTED) must not count as the answer.
    try {
      // A redirect's body is not kept by Chromium (and is not followed: it is the answer).
      const hasBody = this.request.method !== 'HEAD' && !NO_BODY_STATUSES.has(status) && !(status >= 300 && status < 400);
      const body = hasBody ? await this.readBody(paused.requestId) : Buffer.alloc(0);
      if (status === 403 && body.subarray(0, FORWARDER_REFUSAL.length).toString('utf8') === FORWARDER_REFUSAL) {
        throw new CurlError(403, 'destination_refused', body.toString('utf8'));
      }
      if (status >= 590 && status <= 599) {
        const said = `${status} ${paused.responseStatusText ?? ''}`.trim();
        throw new CurlError(502, 'curl_failed', `The browser's proxy could not reach the target: ${said}${body.length > 0 ? ` (${body.subarray(0, 500).toString('utf8')})` : ''}`);
      }
      await this.waitForRawHeaders();
      this.finish({ status, headers: answerHeaders(this.rawHeaders, paused.responseHeaders ?? []), body });
    } catch (error) {
      this.fail(error);
    } finally {
      this.aborting = true;
      await send('Fetch.failRequest', { errorReason: 'Aborted' }).catch(() => undefined);
    }
  }

  private finish(result: ExchangeResult): void {
    if (this.settled) return;
    this.settled = true;
    this.settle.resolve(result);
  }

  private async readBody(requestId: string): Promise<Buffer> {
    const { stream } = await this.cdp.send<{ stream: string }>('Fetch.takeResponseBodyAsStream', { requestId }, this.sessionId);
    const chunks: Buffer[] = [];
    let size = 0;
    try {
      for (;;) {
        const read = await this.cdp.send<{ data: string; base64Encoded?: boolean; eof: boolean }>('IO.read', { handle: stream, size: READ_CHUNK_BYTES }, this.sessionId);
        const chunk = Buffer.from(read.data, read.base64Encoded ? 'base64' : 'utf8');
        size += chunk.length;
        if (size > CURL_LIMITS.maxResponseBytes) {
          throw new CurlError(
            413,
            'response_too_large',
            `The response body is larger than ${CURL_LIMITS.maxResponseBytes} bytes (10 MiB), the most curl returns; nothing of it is returned`,
          );
        }
        chunks.push(chunk);
        if (read.eof) return Buffer.concat(chunks);
      }
    } finally {
      await this.cdp.send('IO.close', { handle: stream }, this.sessionId).catch(() => undefined);
    }
  }

  private async waitForRawHeaders(): Promise<void> {
    if (this.rawHeaders) return;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, RAW_HEADERS_GRACE_MS);
      this.rawHeadersCame = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }
}
