import { randomBytes } from 'node:crypto';
import { rm } from 'node:fs/promises';
import type { IncomingMessage } from 'node:http';
import path from 'node:path';
import { PassThrough, type Readable } from 'node:stream';
import busboy from 'busboy';
import { virtualComponents } from './confine.js';
import { FsError, invalidPath } from './errors.js';
import { writeFile } from './operations.js';
import type { SessionRoot } from './session-root.js';
import { spool, uploadZip } from './zip.js';

/**
 * multipart/form-data with busboy (the parser under multer: streaming, maintained).
 * Parts are handled in arrival order, one write at a time; a file part whose dest_path
 * has not arrived yet waits in memory until it does.
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
    parser.on('field', (name, value) => {
      chain = chain.then(() => onField(name, value));
    });
    parser.on('file', (name, stream) => {
      // Buffer the part while earlier writes finish, so busboy keeps parsing.
      const buffered = stream.pipe(new PassThrough({ highWaterMark: 1 << 20 }));
      chain = chain.then(() => onFile(name, buffered));
      chain.catch(() => stream.resume());
    });
    parser.once('error', fail);
    parser.once('close', () => chain.then(resolve, fail));
    request.pipe(parser);
  });
}

const FILES_PART = /^files\[(\d+)\]\[(dest_path|file)\]$/;

export async function upload(root: SessionRoot, request: IncomingMessage): Promise<void> {
  const destinations = new Map<string, string>();
  const pending = new Map<string, Buffer>();
  let written = 0;
  await parseMultipart(
    request,
    (name, value) => {
      const match = FILES_PART.exec(name);
      if (!match || match[2] !== 'dest_path') return;
      virtualComponents(value);
      destinations.set(match[1]!, value);
    },
    async (name, stream) => {
      const match = FILES_PART.exec(name);
      if (!match || match[2] !== 'file') {
        stream.resume();
        return;
      }
      const dest = destinations.get(match[1]!);
      if (dest !== undefined) {
        await writeFile(root, dest, stream);
        written++;
        return;
      }
      const chunks: Buffer[] = [];
      for await (const chunk of stream as AsyncIterable<Buffer>) chunks.push(chunk);
      pending.set(match[1]!, Buffer.concat(chunks));
    },
  );
  for (const [index, bytes] of pending) {
    const dest = destinations.get(index);
    if (dest === undefined) throw invalidPath(`files[${index}][dest_path] is missing`);
    await writeFile(root, dest, bytes);
    written++;
  }
  if (written === 0) throw new FsError(400, 'invalid_request', 'no files[i][file] part with its files[i][dest_path]');
}

export async function uploadZipRequest(root: SessionRoot, request: IncomingMessage): Promise<void> {
  const spoolPath = path.join(path.dirname(root.hostRoot), 'tmp', `upload-${randomBytes(8).toString('hex')}.zip`);
  try {
    await receiveZip(root, request, spoolPath);
  } finally {
    await rm(spoolPath, { force: true });
  }
}

async function receiveZip(root: SessionRoot, request: IncomingMessage, spoolPath: string): Promise<void> {
  let destPath: string | undefined;
  let received = false;
  await parseMultipart(
    request,
    (name, value) => {
      if (name === 'dest_path') destPath = value;
    },
    async (name, stream) => {
      if (name !== 'zip_file' || received) {
        stream.resume();
        return;
      }
      received = true;
      await spool(stream, spoolPath);
    },
  );
  if (!received) throw new FsError(400, 'invalid_request', 'the zip_file part is missing');
  if (destPath === undefined) throw new FsError(400, 'invalid_request', 'the dest_path part is missing');
  await uploadZip(root, destPath, spoolPath);
}
