import { randomBytes } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { rm } from 'node:fs/promises';
import type { IncomingMessage } from 'node:http';
import path from 'node:path';
import { PassThrough, type Readable } from 'node:stream';
import busboy from 'busboy';
import { virtualComponents } from './confine.js';
import { FsError, invalidPath, tooLarge } from './errors.js';
import { writeFile } from './operations.js';
import type { Meter } from './quota.js';
import type { SessionRoot } from './session-root.js';
import { NO_UPLOAD_PARTS, UploadPartNames } from './upload-parts.js';
import { spool, uploadZip } from './zip.js';

/**
 * multipart/form-data with busboy (the parser under multer: streaming, maintained).
 * Parts are handled in arrival order, one write at a time, with backpressure: a part
 * waits in a 1 MiB buffer while the one before it is written, and busboy (and the request)
 * pause when that is full. File parts are spooled to disk, so no part is ever held whole
 * in memory.
 */

type FilePart = (name: string, stream: Readable) => Promise<void>;

function parseMultipart(request: IncomingMessage, onField: (name: string, value: string) => void, onFile: FilePart): Promise<void> {
  return new Promise((resolve, reject) => {
    let parser: busboy.Busboy;
    try {
      parser = busboy({ headers: request.headers, limits: { fieldSize: 64 * 1024 } });
    } catch (error) {
      reject(new FsError(400, 'invalid_request', `expected multipart/form-data: ${(error as Error).message}`));
      return;
    }
    let chain = Promise.resolve();
    const fail = (error: unknown) => {
      request.unpipe(parser);
      request.resume();
      reject(error instanceof Error ? error : new Error(String(error)));
    };
    // Every link of the chain gets a handler at once: a rejection (a bad dest_path, a
    // limit) left unhandled until busboy's 'close' would end the agent as an unhandled
    // rejection. After a failure, later parts are drained, not written.
    parser.on('field', (name, value) => {
      chain = chain.then(() => onField(name, value));
      chain.catch(() => undefined);
    });
    parser.on('file', (name, stream) => {
      // Buffer the part while earlier writes finish, so busboy keeps parsing.
      const buffered = stream.pipe(new PassThrough({ highWaterMark: 1 << 20 }));
      // A write that fails (a limit, a bad path) destroys `buffered`; the rest of the part
      // is then drained so busboy goes on to the end, and busboy's further writes into the
      // destroyed stream must not surface as an uncaught 'error'.
      buffered.on('error', () => undefined);
      // busboy destroys the part with an error when the form ends inside it (a truncated
      // body): passed on to the writer, not left to surface as an uncaught 'error'.
      stream.on('error', (error: Error) => buffered.destroy(malformed(error)));
      buffered.once('close', () => {
        stream.unpipe(buffered);
        stream.resume();
      });
      chain = chain.then(() => onFile(name, buffered));
      chain.catch(() => buffered.destroy());
    });
    // busboy may emit 'error' more than once (a bad part header, then the form's end): `on`, not `once`, or the second ends the process.
    parser.on('error', (error: Error) => fail(malformed(error)));
    parser.once('close', () => chain.then(resolve, fail));
    request.pipe(parser);
  });
}

/** busboy's own errors (a truncated form, a bad boundary) are the client's: 400. */
const malformed = (error: Error) => new FsError(400, 'invalid_multipart', `malformed multipart body: ${error.message}`);

/** A file under `<work dir>/tmp`, the agent's own spool area (outside "/"). */
const spoolFile = (root: SessionRoot, kind: string) => path.join(path.dirname(root.hostRoot), 'tmp', `${kind}-${randomBytes(8).toString('hex')}`);

/**
 * Writes every file part to its dest_path, in whichever spelling the client names them
 * (upload-parts.ts). Every file part is spooled to disk first (never held in memory),
 * counted against the quota as it arrives, and only once the whole form has been read and
 * every file has its dest_path (and every dest_path its file) is anything moved into
 * place: a malformed form writes nothing.
 */
export async function upload(root: SessionRoot, request: IncomingMessage): Promise<void> {
  const names = new UploadPartNames();
  const destinations = new Map<string, string>();
  const spooled = new Map<string, { file: string; size: number }>();
  const meter = await root.quota.meter();
  const once = (seen: Map<string, unknown>, pair: string, field: 'dest_path' | 'file') => {
    if (seen.has(pair)) throw new FsError(400, 'invalid_request', `${names.describe(pair, field)} is sent twice`);
    // Each file is a spool file until the end: as many as one upload_zip may hold entries.
    if (seen.size >= root.limits.zipMaxEntries) {
      throw tooLarge('too_many_files', `an upload may hold at most ${root.limits.zipMaxEntries} files (AGENT_FS_ZIP_MAX_ENTRIES)`);
    }
  };
  try {
    await parseMultipart(
      request,
      (name, value) => {
        const part = names.pairOf(name, false);
        if (!part) return;
        once(destinations, part.pair, 'dest_path');
        virtualComponents(value);
        destinations.set(part.pair, value);
      },
      async (name, stream) => {
        const part = names.pairOf(name, true);
        if (!part) {
          stream.resume();
          return;
        }
        once(spooled, part.pair, 'file');
        const entry = { file: spoolFile(root, 'part'), size: 0 };
        spooled.set(part.pair, entry);
        entry.size = await spool(stream, entry.file, meter);
      },
    );
    for (const pair of destinations.keys()) if (!spooled.has(pair)) throw invalidPath(`${names.describe(pair, 'file')} is missing`);
    for (const pair of spooled.keys()) if (!destinations.has(pair)) throw invalidPath(`${names.describe(pair, 'dest_path')} is missing`);
    if (spooled.size === 0) throw new FsError(400, 'invalid_request', NO_UPLOAD_PARTS);
    for (const [pair, { file, size }] of spooled) {
      meter.drop(size);
      const source = createReadStream(file);
      source.on('error', () => undefined); // seen by writeFile as it reads; never uncaught
      await writeFile(root, destinations.get(pair)!, source, undefined, meter);
      await rm(file, { force: true });
    }
  } finally {
    meter.close();
    await Promise.all([...spooled.values()].map(({ file }) => rm(file, { force: true })));
  }
}

export async function uploadZipRequest(root: SessionRoot, request: IncomingMessage): Promise<void> {
  const spoolPath = spoolFile(root, 'upload');
  const meter = await root.quota.meter();
  try {
    await receiveZip(root, request, spoolPath, meter);
  } finally {
    meter.close();
    await rm(spoolPath, { force: true });
  }
}

async function receiveZip(root: SessionRoot, request: IncomingMessage, spoolPath: string, meter: Meter): Promise<void> {
  let destPath: string | undefined;
  let received = -1;
  await parseMultipart(
    request,
    (name, value) => {
      if (name === 'dest_path') destPath = value;
    },
    async (name, stream) => {
      if (name !== 'zip_file' || received >= 0) {
        stream.resume();
        return;
      }
      received = 0;
      received = await spool(stream, spoolPath, meter);
    },
  );
  if (received < 0) throw new FsError(400, 'invalid_request', 'the zip_file part is missing');
  if (destPath === undefined) throw new FsError(400, 'invalid_request', 'the dest_path part is missing');
  // The spool is not the browser's: only what is extracted counts from here on.
  meter.drop(received);
  await uploadZip(root, destPath, spoolPath, meter);
}
