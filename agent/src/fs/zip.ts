import { constants, createWriteStream } from 'node:fs';
import { open, stat } from 'node:fs/promises';
import { Transform, type Readable, type Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import yauzl from 'yauzl';
import yazl from 'yazl';
import type { FsLimits } from '../config.js';
import { safeZipEntry, virtualComponents } from './confine.js';
import { FsError, fromErrno, invalidPath, invalidZip, tooLarge } from './errors.js';
import { DEFAULT_DIR_MODE, DEFAULT_FILE_MODE, deleteFile, writeFile } from './operations.js';
import type { Meter } from './quota.js';
import { refuseHardLinked, type SessionRoot } from './session-root.js';
import { walkTree, type WalkEntry } from './walk.js';

/**
 * Zip both ways. yazl writes (streaming, no native code, files opened lazily one at a
 * time); yauzl reads (it needs random access to the central directory, so the upload is
 * spooled to a file first). Both are maintained by the same author and have no
 * dependencies worth mentioning, unlike archiver (a dozen) or unzipper (unmaintained).
 */

/**
 * Streams the tree under `virtualPath` as a zip: regular files and directories (symlinks,
 * special files and files with other hard links are left out). The tree is walked first
 * (walk.ts: bounded, one open per directory, asynchronous), then each file is opened
 * lazily from its directory's real path with O_NOFOLLOW and checked under the root again.
 * Resolves, once the walk is done, to the function that streams the zip.
 */
export async function downloadDirZip(root: SessionRoot, virtualPath: string): Promise<(output: Writable) => Promise<void>> {
  const components = virtualComponents(virtualPath);
  const entries: WalkEntry[] = [];
  const dir = await root.openDir(components);
  try {
    await walkTree(
      root,
      dir,
      components.length,
      (entry) => {
        const { info } = entry;
        if (info.isDirectory() || (info.isFile() && info.nlink === 1)) entries.push(entry);
      },
      { base: components.length ? `/${components.join('/')}` : '' },
    );
  } finally {
    await dir.close();
  }
  // Walked before the caller sends its 200: a limit the tree passes is still a 4xx.
  return (output) => streamZip(root, components, entries, output);
}

async function streamZip(root: SessionRoot, components: string[], entries: WalkEntry[], output: Writable): Promise<void> {
  const zip = new yazl.ZipFile();
  const nonEmpty = new Set(entries.map((entry) => entry.rel.slice(0, entry.rel.lastIndexOf('/'))));
  for (const { rel, info, parentHost, name } of entries) {
    const options = { mtime: info.mtime, mode: info.mode & 0o777 };
    if (info.isDirectory()) {
      if (!nonEmpty.has(rel)) zip.addEmptyDirectory(rel, options);
      continue;
    }
    zip.addReadStreamLazy(rel, options, (callback) => {
      openEntry(root, `${parentHost}/${name}`, `/${[...components, rel].join('/')}`).then(
        (handle) => callback(null, handle.createReadStream()),
        (error: unknown) => callback(error as Error, undefined as never),
      );
    });
  }
  zip.end();
  // yazl reports an entry that failed to open (deleted, swapped for a directory since the
  // walk) or to read as an 'error' on the ZipFile itself: with no listener that was an
  // uncaught exception ending the agent. It ends this response instead.
  zip.on('error', (error: Error) => (zip.outputStream as Readable).destroy(error));
  await pipeline(zip.outputStream, output);
}

async function openEntry(root: SessionRoot, hostPath: string, virtualPath: string) {
  const handle = await open(hostPath, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK).catch((error: unknown) => {
    throw fromErrno(error, virtualPath);
  });
  await root.verify(handle, virtualPath);
  await refuseHardLinked(handle, virtualPath);
  if (!(await handle.stat()).isFile()) {
    await handle.close();
    throw new FsError(400, 'is_a_directory', `${virtualPath} changed into a directory`);
  }
  return handle;
}

/** Streams a multipart file part to a spool file the agent alone uses, counted against the quota; its size. */
export async function spool(source: Readable, spoolPath: string, meter: Meter): Promise<number> {
  let size = 0;
  const count = new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      try {
        meter.add(chunk.length);
        size += chunk.length;
        callback(null, chunk);
      } catch (error) {
        callback(error as Error);
      }
    },
  });
  try {
    await pipeline(source, count, createWriteStream(spoolPath, { flags: 'wx', mode: 0o600 }));
  } catch (error) {
    source.resume();
    throw error;
  }
  return size;
}
const openZip = (file: string) =>
  new Promise<yauzl.ZipFile>((resolve, reject) =>
    yauzl.open(file, { lazyEntries: true, autoClose: false, decodeStrings: false, validateEntrySizes: true }, (error, zip) =>
      error ? reject(invalidPath(`not a zip file: ${error.message}`)) : resolve(zip),
    ),
  );

async function readEntries(zip: yauzl.ZipFile): Promise<yauzl.Entry[]> {
  const entries: yauzl.Entry[] = [];
  await new Promise<void>((resolve, reject) => {
    zip.on('entry', (entry: yauzl.Entry) => {
      entries.push(entry);
      zip.readEntry();
    });
    zip.once('end', () => resolve());
    zip.on('error', (error: Error) => reject(invalidPath(`bad zip file: ${error.message}`)));
    zip.readEntry();
  });
  return entries;
}

const S_IFMT = 0o170000;
const S_IFLNK = 0o120000;

/**
 * Extracts into `destPath`. Every entry is checked before anything is written: its name
 * (absolute, "..", backslash: zip-slip), its type (no symlinks), its depth, and the zip as
 * a whole against the limits (entry count, total uncompressed size, ratio to the zip's
 * own size, the quota). yauzl's validateEntrySizes makes each entry's stream fail if it
 * inflates past the size it declares, so the declared sizes checked here bound the real
 * ones. A failure part way removes the files written so far.
 */
export async function uploadZip(root: SessionRoot, destPath: string, zipFile: string, meter: Meter): Promise<void> {
  const dest = virtualComponents(destPath);
  const { limits } = root;
  const zip = await openZip(zipFile);
  const written: string[] = [];
  try {
    if (zip.entryCount > limits.zipMaxEntries) throw tooLarge('too_many_entries', `the zip has ${zip.entryCount} entries; at most ${limits.zipMaxEntries} are allowed`);
    const entries = await readEntries(zip);
    const planned = entries.map((entry) => {
      const name = (entry.fileName as unknown as Buffer).toString('utf8');
      const parts = safeZipEntry(name);
      root.checkDepth(dest.length + parts.length, `/${[...dest, ...parts].join('/')}`);
      const unixMode = (entry.externalFileAttributes >>> 16) & 0xffff;
      if ((unixMode & S_IFMT) === S_IFLNK) throw invalidPath(`zip entry is a symbolic link: ${JSON.stringify(name)}`);
      return { entry, parts, isDir: name.endsWith('/'), mode: unixMode & 0o777 };
    });
    checkExpansion(planned.map(({ entry }) => entry), (await stat(zipFile)).size, limits);
    meter.check(planned.reduce((sum, { entry }) => sum + entry.uncompressedSize, 0));
    for (const { entry, parts, isDir, mode } of planned) {
      const virtual = `/${[...dest, ...parts].join('/')}`;
      if (isDir) {
        await (await root.openDir([...dest, ...parts], { createMode: mode || DEFAULT_DIR_MODE })).close();
        continue;
      }
      const entryStream = await openEntryStream(zip, entry);
      written.push(virtual);
      try {
        await writeFile(root, virtual, entryStream.stream, ((mode & 0o777) || DEFAULT_FILE_MODE).toString(8).padStart(3, '0'), meter);
      } catch (error) {
        // The entry's own failure (inflate error, more bytes than it declares) is the zip's
        // fault, whatever the consumer made of it; the quota and paths keep their codes.
        throw entryStream.failure() && !(error instanceof FsError) ? invalidZip(`bad zip entry ${JSON.stringify(virtual)}: ${entryStream.failure()!.message}`) : error;
      } finally {
        entryStream.stream.destroy();
      }
    }
  } catch (error) {
    for (const virtual of written) await deleteFile(root, virtual).catch(() => undefined);
    throw error;
  } finally {
    zip.close();
  }
}

/**
 * An entry's stream, with its 'error' listener attached at once. yauzl pipes the inflater
 * into the stream as soon as it is opened, so an entry that inflates past its declared size
 * fails before the writer (several awaits later) starts reading: with no listener then,
 * the 'error' event was an uncaught exception that took the agent and its browser down.
 * The error is kept for the writer, which sees the stream as errored when it reads.
 */
async function openEntryStream(zip: yauzl.ZipFile, entry: yauzl.Entry): Promise<{ stream: Readable; failure: () => Error | undefined }> {
  const stream = await new Promise<Readable>((resolve, reject) =>
    zip.openReadStream(entry, (error, readable) => (error ? reject(invalidZip(`bad zip entry: ${error.message}`)) : resolve(readable))),
  );
  let failure: Error | undefined;
  stream.on('error', (error: Error) => (failure ??= error));
  return { stream, failure: () => failure };
}

const RATIO_FLOOR_BYTES = 1024 * 1024;

/** 413 when the zip would expand past the size limit, or by more than the ratio limit (past 1 MiB). */
function checkExpansion(entries: yauzl.Entry[], zipBytes: number, limits: FsLimits): void {
  const total = entries.reduce((sum, entry) => sum + entry.uncompressedSize, 0);
  if (total > limits.zipMaxBytes) throw tooLarge('zip_too_large', `the zip expands to ${total} bytes; at most ${limits.zipMaxBytes} are allowed`);
  if (total > RATIO_FLOOR_BYTES && total / Math.max(zipBytes, 1) > limits.zipMaxRatio) {
    throw tooLarge('zip_ratio_too_high', `the zip expands ${Math.round(total / Math.max(zipBytes, 1))} times its size; at most ${limits.zipMaxRatio} times is allowed`);
  }
}
