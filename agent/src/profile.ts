import http, { type IncomingMessage } from 'node:http';
import https from 'node:https';
import { lchown, readdir } from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { Logger } from 'pino';
import type { BrowserLaunchSpec } from '../../contract/browser-runtime.js';
import { extractArchive, packProfile } from '../../lib/profile-archive.js';
import type { SystemUser } from '../../lib/system-user.js';

/**
 * The session's profile, fetched from the service before Chromium starts and sent back
 * after it closed, both over HTTP at the archive URL of the launch spec (its token is the
 * authorisation). node:http rather than fetch: fetch loads undici, about 150 ms on the
 * launch path. Loaded only for sessions with a profile.
 */

export type ProfileTarget = NonNullable<BrowserLaunchSpec['profile']>;

/** A transfer the service refused or that broke; the message says which and why. */
export class ProfileTransferError extends Error {
  override readonly name = 'ProfileTransferError';
}

/**
 * Fills the fresh user-data dir with the stored profile (nothing when none is stored yet)
 * and gives it to Chromium's user. The archive is checked entry by entry like an upload
 * is on the service side: the agent trusts the store no more than the store trusts it.
 */
export async function restoreProfile(
  target: ProfileTarget,
  options: { userDataDir: string; user: SystemUser | undefined; signal: AbortSignal; log: Logger },
): Promise<void> {
  const started = Date.now();
  const response = await send('GET', target.archiveUrl, { signal: options.signal }).catch((error: unknown) => {
    throw new ProfileTransferError(`profile ${target.id} could not be fetched: ${(error as Error).message}`, { cause: error });
  });
  if (response.statusCode === 204) {
    response.resume();
    options.log.info({ profile_id: target.id }, 'profile holds nothing yet: the browser starts with an empty one');
    return;
  }
  if (response.statusCode !== 200) throw new ProfileTransferError(`profile ${target.id} could not be fetched: ${await refusal(response)}`);
  const { entries, bytes } = await extractArchive(response, options.userDataDir).catch((error: unknown) => {
    throw new ProfileTransferError(`profile ${target.id} could not be unpacked: ${(error as Error).message}`, { cause: error });
  });
  if (options.user) await chownTree(options.userDataDir, options.user);
  options.log.info({ profile_id: target.id, entries, bytes, ms: Date.now() - started }, 'profile restored');
}

/**
 * Sends the user-data dir back, without caches and run-time files. Called only after
 * Chromium closed cleanly: Browser.close flushes cookies and storage to disk, while a
 * crashed or killed browser may leave them half-written, which must not replace a good
 * stored profile.
 */
export async function saveProfile(target: ProfileTarget, options: { userDataDir: string; signal: AbortSignal; log: Logger }): Promise<void> {
  const started = Date.now();
  const body = await packProfile(options.userDataDir);
  let response: IncomingMessage;
  try {
    response = await send('PUT', target.archiveUrl, { body, signal: options.signal });
  } catch (error) {
    body.destroy();
    throw new ProfileTransferError(`profile ${target.id} could not be sent: ${(error as Error).message}`, { cause: error });
  }
  if (response.statusCode !== 200) throw new ProfileTransferError(`profile ${target.id} was not saved: ${await refusal(response)}`);
  const answer = JSON.parse(await readText(response)) as { size_bytes?: number };
  options.log.info({ profile_id: target.id, size_bytes: answer.size_bytes, ms: Date.now() - started }, 'profile saved');
}

/** One request; resolves with the response as soon as its headers arrive. */
function send(method: 'GET' | 'PUT', url: string, options: { body?: Readable; signal: AbortSignal }): Promise<IncomingMessage> {
  const target = new URL(url);
  const client = target.protocol === 'https:' ? https : http;
  return new Promise((resolve, reject) => {
    const request = client.request(
      target,
      { method, signal: options.signal, headers: options.body ? { 'content-type': 'application/x-tar' } : {} },
      resolve,
    );
    request.once('error', reject);
    if (!options.body) request.end();
    // A refusal may arrive (and close the connection) before the body is all sent; the
    // response then carries the reason, so a broken upload pipe is not the error to report.
    else pipeline(options.body, request).catch(reject);
  });
}

/** The service's `{code, message}` of a refusal, as one line. */
async function refusal(response: IncomingMessage): Promise<string> {
  const text = await readText(response).catch(() => '');
  try {
    const body = JSON.parse(text) as { code?: string; message?: string };
    return `the service answered ${response.statusCode} ${body.code ?? ''}: ${body.message ?? ''}`.trim();
  } catch {
    return `the service answered ${response.statusCode}`;
  }
}

async function readText(response: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of response as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size <= 64 * 1024) chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** lchown, never chown: a symlink in the profile must not hand its target to the user. */
async function chownTree(root: string, user: SystemUser): Promise<void> {
  await lchown(root, user.uid, user.gid);
  for (const entry of await readdir(root, { withFileTypes: true, recursive: true })) {
    await lchown(path.join(entry.parentPath, entry.name), user.uid, user.gid);
  }
}
