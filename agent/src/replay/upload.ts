import { createReadStream } from 'node:fs';
import http, { type IncomingMessage } from 'node:http';
import https from 'node:https';
import { pipeline } from 'node:stream/promises';
import { replayFailureUrl } from '../../../contract/replay-wire.js';

/**
 * The finished MP4 goes to the service's side door (PUT upload_url, whose token is the
 * whole authorisation), or, when there is none, the reason goes to its failure door, so the
 * replay ends as failed rather than recording forever. node:http, as profile.ts does.
 */

export async function uploadReplay(uploadUrl: string, file: string, sizeBytes: number, signal: AbortSignal): Promise<void> {
  const response = await request('PUT', uploadUrl, { 'content-type': 'video/mp4', 'content-length': String(sizeBytes) }, signal, (req) =>
    pipeline(createReadStream(file), req),
  );
  if (response.status !== 200) throw new Error(`the service refused the video: ${response.status} ${response.text}`);
}

export async function reportReplayFailure(uploadUrl: string, message: string, signal: AbortSignal): Promise<void> {
  const body = JSON.stringify({ message: message.slice(0, 2000) });
  const response = await request('POST', replayFailureUrl(uploadUrl), { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) }, signal, (req) => {
    req.end(body);
    return Promise.resolve();
  });
  if (response.status !== 204) throw new Error(`the service refused the failure report: ${response.status} ${response.text}`);
}

function request(
  method: string,
  url: string,
  headers: Record<string, string>,
  signal: AbortSignal,
  send: (req: http.ClientRequest) => Promise<void>,
): Promise<{ status: number; text: string }> {
  const target = new URL(url);
  const client = target.protocol === 'https:' ? https : http;
  return new Promise((resolve, reject) => {
    const req = client.request(target, { method, headers, signal }, (response: IncomingMessage) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.length < 64 && chunks.push(chunk));
      response.once('end', () => resolve({ status: response.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8').slice(0, 500) }));
      response.once('error', reject);
    });
    req.once('error', reject);
    // A refusal may close the connection before the body is all sent; its answer is the error to report.
    send(req).catch(() => undefined);
  });
}
