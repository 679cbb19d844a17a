import http from 'node:http';
import https from 'node:https';
import { mkdir, rm } from 'node:fs/promises';
import path from 'node:path';
import type { Logger } from 'pino';
import type { ExtensionTarget } from '../../../contract/launch-spec.js';
import { extractExtensionZip } from '../../../lib/extension-zip.js';

/**
 * Where a browser's extensions live: `<work dir>/extensions/<name>`, written by the agent
 * (0755 folders, 0644 files), so Chromium's unprivileged user reads them and cannot change
 * them; removed with the work dir. The agent checks every zip again (lib/extension-zip.ts)
 * before unpacking: it trusts the store no more than the store trusts an upload.
 */

/** The largest zip the agent takes, fetched or uploaded (the API's own limit defaults to the same). */
export const MAX_EXTENSION_ZIP_BYTES = 50 * 1024 * 1024;

export class ExtensionFetchError extends Error {
  override readonly name = 'ExtensionFetchError';
}

export const extensionsDirOf = (workRoot: string) => path.join(workRoot, 'extensions');

/** Unpacks one zip under its name; the folder is removed again when the zip is refused. */
export async function unpackExtension(workRoot: string, name: string, zip: Buffer): Promise<string> {
  const base = extensionsDirOf(workRoot);
  await mkdir(base, { recursive: true, mode: 0o755 });
  const target = path.join(base, name);
  try {
    await extractExtensionZip(zip, target);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') await rm(target, { recursive: true, force: true });
    throw error;
  }
  return target;
}

/** The launch spec's extensions, fetched at their archive URLs and unpacked; a failure fails the launch. */
export async function fetchExtensions(targets: ExtensionTarget[], options: { workRoot: string; signal: AbortSignal; log: Logger }): Promise<string[]> {
  const dirs: string[] = [];
  for (const target of targets) {
    const started = Date.now();
    const zip = await download(target.archiveUrl, options.signal).catch((error: unknown) => {
      throw new ExtensionFetchError(`extension ${target.id} could not be fetched: ${(error as Error).message}`, { cause: error });
    });
    const dir = await unpackExtension(options.workRoot, target.name, zip).catch((error: unknown) => {
      throw new ExtensionFetchError(`extension ${target.id} could not be unpacked: ${(error as Error).message}`, { cause: error });
    });
    dirs.push(dir);
    options.log.info({ extension_id: target.id, name: target.name, bytes: zip.length, ms: Date.now() - started }, 'extension loaded');
  }
  return dirs;
}

/** One GET, the body bounded by MAX_EXTENSION_ZIP_BYTES (node:http: fetch would load undici on the launch path). */
function download(url: string, signal: AbortSignal): Promise<Buffer> {
  const target = new URL(url);
  const client = target.protocol === 'https:' ? https : http;
  return new Promise((resolve, reject) => {
    const request = client.get(target, { signal }, (response) => {
      const chunks: Buffer[] = [];
      let size = 0;
      response.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size > MAX_EXTENSION_ZIP_BYTES) response.destroy(new Error(`larger than ${MAX_EXTENSION_ZIP_BYTES} bytes`));
        else chunks.push(chunk);
      });
      response.once('error', reject);
      response.once('end', () => {
        const body = Buffer.concat(chunks);
        if (response.statusCode === 200) resolve(body);
        else reject(new Error(`the service answered ${response.statusCode}: ${body.toString('utf8', 0, Math.min(body.length, 500))}`));
      });
    });
    request.once('error', reject);
  });
}

