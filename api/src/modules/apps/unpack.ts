import { createWriteStream } from 'node:fs';
import { mkdir, open } from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import yauzl from 'yauzl';
import { AppError, badRequest } from '../../http/errors.js';

/**
 * A deployment's zip, read with yauzl (it needs the central directory, so the upload is
 * spooled to a file first; no native code, maintained). Every entry is checked before
 * anything is written (planZip): its name (absolute, "..", backslash, NUL: zip-slip), its
 * type (symlink entries refused: one pointing out would let the build or the app read
 * host files), and the zip as a whole against the limits. validateEntrySizes makes an
 * entry that inflates past the size it declares fail, so the declared sizes checked here
 * bound what is written (no zip bomb past the limits).
 */

export interface ZipLimits {
  maxUnpackedBytes: number;
  maxFiles: number;
}

export interface ZipPlan {
  /** Files, as relative paths with '/' separators. */
  files: Set<string>;
  totalBytes: number;
}

const S_IFMT = 0o170000;
const S_IFLNK = 0o120000;

const openZip = (file: string) =>
  new Promise<yauzl.ZipFile>((resolve, reject) =>
    yauzl.open(file, { lazyEntries: true, autoClose: false, decodeStrings: false, validateEntrySizes: true }, (error, zip) =>
      error ? reject(badRequest('invalid_zip', `The file is not a readable zip: ${error.message}`)) : resolve(zip),
    ),
  );

/** A zip entry's name as safe relative path components, or a 400 naming it. */
export function safeRelativePath(name: string, what: string): string[] {
  const fail = (why: string) => badRequest('invalid_path', `${what} ${JSON.stringify(name)} ${why}`, [{ code: 'invalid_path', message: why, field: what }]);
  // eslint-disable-next-line no-control-regex -- refusing NUL and control characters is the point
  if (/[\u0000-\u001f\\]/.test(name)) throw fail('holds a backslash or a control character');
  if (name.startsWith('/')) throw fail('is absolute');
  const parts = name.split('/').filter((part) => part !== '' && part !== '.');
  if (parts.some((part) => part === '..')) throw fail('leaves its directory (..)');
  if (parts.length === 0) throw fail('is empty');
  return parts;
}

async function entriesOf(zip: yauzl.ZipFile): Promise<yauzl.Entry[]> {
  const entries: yauzl.Entry[] = [];
  await new Promise<void>((resolve, reject) => {
    zip.on('entry', (entry: yauzl.Entry) => {
      entries.push(entry);
      zip.readEntry();
    });
    zip.once('end', () => resolve());
    zip.on('error', (error: Error) => reject(badRequest('invalid_zip', `The zip is damaged: ${error.message}`)));
    zip.readEntry();
  });
  return entries;
}

const tooLarge = (code: string, message: string) => new AppError(413, code, message, { details: [{ code, message }] });

interface PlannedEntry {
  entry: yauzl.Entry;
  parts: string[];
  isDir: boolean;
}

async function plan(zip: yauzl.ZipFile, limits: ZipLimits): Promise<PlannedEntry[]> {
  if (zip.entryCount > limits.maxFiles) {
    throw tooLarge('too_many_files', `The zip holds ${zip.entryCount} entries; at most ${limits.maxFiles} are allowed (BROWSERPLANE_APP_MAX_FILES)`);
  }
  const planned = (await entriesOf(zip)).map((entry) => {
    const name = (entry.fileName as unknown as Buffer).toString('utf8');
    const parts = safeRelativePath(name, 'zip entry');
    const unixMode = (entry.externalFileAttributes >>> 16) & 0xffff;
    if ((unixMode & S_IFMT) === S_IFLNK) throw badRequest('invalid_zip', `zip entry ${JSON.stringify(name)} is a symbolic link; links are not accepted`);
    return { entry, parts, isDir: name.endsWith('/') };
  });
  const total = planned.reduce((sum, { entry }) => sum + entry.uncompressedSize, 0);
  if (total > limits.maxUnpackedBytes) {
    throw tooLarge('unpacked_too_large', `The zip expands to ${total} bytes; at most ${limits.maxUnpackedBytes} are allowed (BROWSERPLANE_APP_MAX_UNPACKED_MB)`);
  }
  return planned;
}

/** Checks a zip without writing anything: what the create route refuses at once. */
export async function planZip(file: string, limits: ZipLimits): Promise<ZipPlan> {
  const zip = await openZip(file);
  try {
    const planned = await plan(zip, limits);
    const files = new Set(planned.filter((p) => !p.isDir).map((p) => p.parts.join('/')));
    return { files, totalBytes: planned.reduce((sum, { entry }) => sum + entry.uncompressedSize, 0) };
  } finally {
    zip.close();
  }
}

/**
 * Extracts into `target` (a fresh directory only the service writes to at this point).
 * Files are created with O_EXCL ('wx'), so a second entry of the same name cannot write
 * through anything the first left; modes are 0644/0755 whatever the zip says.
 */
export async function extractZip(file: string, target: string, limits: ZipLimits): Promise<void> {
  const zip = await openZip(file);
  try {
    for (const { entry, parts, isDir } of await plan(zip, limits)) {
      const dest = path.join(target, ...parts);
      if (isDir) {
        await mkdir(dest, { recursive: true, mode: 0o755 });
        continue;
      }
      await mkdir(path.dirname(dest), { recursive: true, mode: 0o755 });
      const executable = ((entry.externalFileAttributes >>> 16) & 0o111) !== 0;
      const stream = await new Promise<Readable>((resolve, reject) =>
        zip.openReadStream(entry, (error, readable) => (error ? reject(new Error(`bad zip entry ${parts.join('/')}: ${error.message}`)) : resolve(readable))),
      );
      await pipeline(stream, createWriteStream(dest, { flags: 'wx', mode: executable ? 0o755 : 0o644 }));
    }
  } finally {
    zip.close();
  }
}

/** Whether the spooled upload is a zip (its first bytes: a local file header or an empty archive). */
export async function isZipFile(file: string): Promise<boolean> {
  const handle = await open(file, 'r');
  try {
    const { buffer, bytesRead } = await handle.read(Buffer.alloc(4), 0, 4, 0);
    if (bytesRead < 4) return false;
    const magic = buffer.readUInt32LE(0);
    return magic === 0x04034b50 || magic === 0x06054b50;
  } finally {
    await handle.close();
  }
}
