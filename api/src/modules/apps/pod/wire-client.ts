import { createWriteStream, openAsBlob } from 'node:fs';
import { rm } from 'node:fs/promises';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * The pod's side of the internal wire (docs/apps.md, "The pod program"): every request
 * carries the Job's token, which names its one subject, so paths carry no ids. A
 * connection error or a 5xx is retried with backoff (an API replica restarting, a
 * rolling update); any other answer is final.
 */

/** 409: the subject already ended (its deployment deleted, its invocation finished). The pod stops. */
export class SubjectEndedError extends Error {}

export class WireError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    /** The request was sent more than once: a 401 may then mean an earlier attempt was taken (the token is revoked by a result). */
    readonly retried: boolean,
  ) {
    super(message);
  }
}

export interface WireClient {
  getJson<T>(path: string): Promise<T>;
  /** The body into `file` (replaced). */
  download(path: string, file: string): Promise<void>;
  /** `file` as the body of a PUT. */
  upload(path: string, file: string, contentType: string): Promise<void>;
  postJson(path: string, body: unknown): Promise<void>;
}

export interface WireClientOptions {
  baseUrl: string;
  token: string;
  /** Attempts per request (default 6: about 30 s of backoff). */
  attempts?: number;
  /** The first backoff (doubled each time, at most 8 s). */
  backoffMs?: number;
}

const JSON_TIMEOUT_MS = 30_000;
const TRANSFER_TIMEOUT_MS = 10 * 60_000;
const MAX_BACKOFF_MS = 8000;

export function createWireClient(options: WireClientOptions): WireClient {
  const base = options.baseUrl.replace(/\/+$/, '');
  const attempts = options.attempts ?? 6;
  const backoffMs = options.backoffMs ?? 500;

  async function send(path: string, init: () => RequestInit | Promise<RequestInit>, timeoutMs: number): Promise<Response> {
    for (let attempt = 1; ; attempt++) {
      const last = attempt >= attempts;
      let response: Response;
      try {
        const request = await init();
        response = await fetch(base + path, {
          ...request,
          headers: { authorization: `Bearer ${options.token}`, ...(request.headers as Record<string, string> | undefined) },
          signal: AbortSignal.timeout(timeoutMs),
        });
      } catch (error) {
        if (last) throw new Error(`${path}: ${describe(error)}`, { cause: error });
        await sleep(Math.min(backoffMs * 2 ** (attempt - 1), MAX_BACKOFF_MS));
        continue;
      }
      if (response.status >= 500 && !last) {
        await response.body?.cancel().catch(() => undefined);
        await sleep(Math.min(backoffMs * 2 ** (attempt - 1), MAX_BACKOFF_MS));
        continue;
      }
      if (response.ok) return response;
      throw await errorOf(path, response, attempt > 1);
    }
  }

  return {
    async getJson<T>(path: string): Promise<T> {
      const response = await send(path, () => ({ method: 'GET', headers: { accept: 'application/json' } }), JSON_TIMEOUT_MS);
      return (await response.json()) as T;
    },
    async download(path, file) {
      // A body cut off halfway is a connection error too: the whole GET is tried again.
      for (let attempt = 1; ; attempt++) {
        const response = await send(path, () => ({ method: 'GET' }), TRANSFER_TIMEOUT_MS);
        try {
          if (!response.body) throw new Error(`GET ${path}: an empty answer`);
          await pipeline(Readable.fromWeb(response.body as WebReadableStream<Uint8Array>), createWriteStream(file));
          return;
        } catch (error) {
          await rm(file, { force: true });
          if (attempt >= attempts) throw error;
          await sleep(Math.min(backoffMs * 2 ** (attempt - 1), MAX_BACKOFF_MS));
        }
      }
    },
    async upload(path, file, contentType) {
      // A file-backed Blob: sent with its length, read again for each attempt.
      const response = await send(path, async () => ({ method: 'PUT', headers: { 'content-type': contentType }, body: await openAsBlob(file) }), TRANSFER_TIMEOUT_MS);
      await response.body?.cancel().catch(() => undefined);
    },
    async postJson(path, body) {
      const text = JSON.stringify(body);
      const response = await send(path, () => ({ method: 'POST', headers: { 'content-type': 'application/json' }, body: text }), JSON_TIMEOUT_MS);
      await response.body?.cancel().catch(() => undefined);
    },
  };
}

async function errorOf(path: string, response: Response, retried: boolean): Promise<Error> {
  const text = await response.text().catch(() => '');
  let code = `http_${response.status}`;
  let message = text.slice(0, 500);
  try {
    const body = JSON.parse(text) as { code?: unknown; message?: unknown };
    if (typeof body.code === 'string') code = body.code;
    if (typeof body.message === 'string') message = body.message;
  } catch {
    // Not the API's error body (a proxy's page): its text is the message.
  }
  if (response.status === 409) return new SubjectEndedError(`${path}: ${message || 'the subject already ended'}`);
  return new WireError(response.status, code, `${path} answered ${response.status} ${code}${message ? `: ${message}` : ''}`, retried);
}

function describe(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const cause = (error as { cause?: unknown }).cause;
  return cause instanceof Error ? `${error.message} (${cause.message})` : error.message;
}
