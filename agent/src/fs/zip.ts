import { createWriteStream } from 'node:fs';
import { lstat, readdir } from 'node:fs/promises';
import type { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import yauzl from 'yauzl';
import yazl from 'yazl';
import { canonicalPath, safeZipEntry, virtualComponents } from './confine.js';
import { invalidPath } from './errors.js';
import { DEFAULT_DIR_MODE, DEFAULT_FILE_MODE, openForRead, writeFile } from './operations.js';
import type { SessionRoot } from './session-root.js';

/**
 * Zip both ways. yazl writes (streaming, no native code, files opened lazily one at a
 * time); yauzl reads (it needs random access to the central directory, so the upload is
 * spooled to a file first). Both are maintained by the same author and have no
 * dependencies worth mentioning, unlike archiver (a dozen) or unzipper (unmaintained).
 */

interface TreeEntry {
  rel: string;
  isDir: boolean;
  mtime: Date;
  mode: number;
}

/** Regular files and directories under a directory; symlinks and special files are left out. */
async function collectTree(root: SessionRoot, components: string[], rel: string, into: TreeEntry[]): Promise<void> {
  const dir = await root.openDir(components);
  const subdirs: string[] = [];
  try {
    for (const name of (await readdir(dir.child(''))).sort()) {
      const info = await lstat(dir.child(name)).catch(() => undefined);
      if (!info || !(info.isFile() || info.isDirectory()) || (info.isFile() && info.nlink > 1)) continue;
      into.push({ rel: `${rel}${name}`, isDir: info.isDirectory(), mtime: info.mtime, mode: info.mode & 0o777 });
      if (info.isDirectory()) subdirs.push(name);
    }
  } finally {
    await dir.close();
  }
  for (const name of subdirs) await collectTree(root, [...components, name], `${rel}${name}/`, into);
}

export async function downloadDirZip(root: SessionRoot, virtualPath: string, output: Writable): Promise<void> {
  const components = virtualComponents(virtualPath);
  const entries: TreeEntry[] = [];
  await collectTree(root, components, '', entries);
  const base = canonicalPath(virtualPath);
  const zip = new yazl.ZipFile();
  const nonEmpty = new Set(entries.map((entry) => entry.rel.slice(0, entry.rel.lastIndexOf('/'))));
  for (const entry of entries) {
    if (entry.isDir) {
      if (!nonEmpty.has(entry.rel)) zip.addEmptyDirectory(entry.rel, { mtime: entry.mtime, mode: entry.mode });
      continue;
    }
    zip.addReadStreamLazy(entry.rel, { mtime: entry.mtime, mode: entry.mode }, (callback) => {
      openForRead(root, `${base === '/' ? '' : base}/${entry.rel}`).then(
        ({ handle }) => callback(null, handle.createReadStream()),
        (error: unknown) => callback(error as Error, undefined as never),
      );
    });
  }
  zip.end();
  await pipeline(zip.outputStream, output);
}

/** Streams a multipart file part to a spool file the agent alone uses. */
export async function spool(source: Readable, spoolPath: string): Promise<void> {
  await pipeline(source, createWriteStream(spoolPath, { flags: 'wx', mode: 0o600 }));
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
    zip.once('error', (error: Error) => reject(invalidPath(`bad zip file: ${error.message}`)));
    zip.readEntry();
  });
  return entries;
}

const S_IFMT = 0o170000;
const S_IFLNK = 0o120000;

/**
 * Extracts into `destPath`. Every entry name is checked before anything is written, so
 * a zip with one zip-slip entry (absolute, "..", backslash) or a symlink writes nothing.
 */
export async function uploadZip(root: SessionRoot, destPath: string, zipFile: string): Promise<void> {
  const dest = virtualComponents(destPath);
  const zip = await openZip(zipFile);
  try {
    const entries = await readEntries(zip);
    const planned = entries.map((entry) => {
      const name = (entry.fileName as unknown as Buffer).toString('utf8');
      const parts = safeZipEntry(name);
      const unixMode = (entry.externalFileAttributes >>> 16) & 0xffff;
      if ((unixMode & S_IFMT) === S_IFLNK) throw invalidPath(`zip entry is a symbolic link: ${JSON.stringify(name)}`);
      return { entry, parts, isDir: name.endsWith('/'), mode: unixMode & 0o777 };
    });
    for (const { entry, parts, isDir, mode } of planned) {
      const virtual = `/${[...dest, ...parts].join('/')}`;
      if (isDir) {
        await (await root.openDir([...dest, ...parts], { createMode: mode || DEFAULT_DIR_MODE })).close();
        continue;
      }
      const stream = await new Promise<Readable>((resolve, reject) =>
        zip.openReadStream(entry, (error, readable) => (error ? reject(invalidPath(`bad zip entry: ${error.message}`)) : resolve(readable))),
      );
      await writeFile(root, virtual, stream, ((mode & 0o777) || DEFAULT_FILE_MODE).toString(8).padStart(3, '0'));
    }
  } finally {
    zip.close();
  }
}
