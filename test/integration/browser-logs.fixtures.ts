import type { HttpClient, HttpResponse } from '../support/http.js';
import { openSse, type SseStream } from '../support/sse.js';

/** Helpers for the log stream tests: the stream of one session, read raw. */

export interface LogFrame {
  event: 'log' | 'error';
  message: string;
  timestamp: string;
  process?: string;
  error?: { code: string; message: string };
}

export function logsPath(sessionId: string, query: Record<string, string>): string {
  return `/browsers/${sessionId}/logs/stream?${new URLSearchParams(query).toString()}`;
}

export function openLogs(client: HttpClient, sessionId: string, query: Record<string, string>): Promise<SseStream<LogFrame>> {
  return openSse<LogFrame>(client.baseUrl + logsPath(sessionId, query), { key: client.key, headers: client.extraHeaders });
}

/** A stream that ends by itself (follow=false): its messages. */
export async function readLogs(client: HttpClient, sessionId: string, query: Record<string, string>): Promise<string[]> {
  const sse = await openLogs(client, sessionId, { ...query, follow: 'false' });
  if (sse.res.status !== 200) throw new Error(`logs stream answered ${sse.res.status}: ${await sse.res.text()}`);
  await sse.ended;
  return sse.payloads.map((frame) => frame.message);
}

/** The refusal of a stream that does not open: status and JSON body. */
export function refusal(client: HttpClient, sessionId: string, query: Record<string, string>): Promise<HttpResponse> {
  return client.get(logsPath(sessionId, query));
}

/** Waits until a frame whose message satisfies `match` has come; returns its index. */
export async function frameMatching(sse: SseStream<LogFrame>, match: (message: string) => boolean, timeoutMs = 10_000): Promise<number> {
  for (let n = 1; ; n++) {
    const frame = await sse.frame(n, timeoutMs);
    if (match(frame.data.message)) return n;
  }
}
