import { createWriteStream } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import yauzl from 'yauzl';

/**
 * An unpacked browser extension as a zip: checked by the API when one is uploaded and by
 * the agent again before it unpacks one (neither trusts the other's copy). Every entry is
 * checked before anything is written: no absolute path, no "..", no backslash or control
 * character, no symlink or device; the entry count and the declared unpacked size are
 * bounded, and yauzl's validateEntrySizes makes an entry that inflates past its declared
 * size fail (so the declared sizes bound what is written). manifest.json sits at the root
 * or under one top folder (how zipping a folder usually comes out); it must be JSON with
 * manifest_version 2 or 3, a name and a version.
 */

export interface ExtensionZipLimits {
  maxUnpackedBytes: number;
  maxEntries: number;
}

/** The agent's bounds (the API's come from its settings and are never looser by default). */
export const DEFAULT_EXTENSION_ZIP_LIMITS: ExtensionZipLimits = { maxUnpackedBytes: 200 * 1024 * 1024, maxEntries: 5000 };

export type ExtensionZipRefusal = 'invalid_zip' | 'unsafe_entry' | 'manifest_missing' | 'invalid_manifest' | 'too_large';

export class ExtensionZipError extends Error {
  override readonly name = 'ExtensionZipError';
  constructor(
    readonly reason: ExtensionZipRefusal,
    message: string,
  ) {
    super(message);
  }
}

export interface ExtensionManifest {
  name: string;
  version: string;
  manifestVersion: 2 | 3;
}

export interface ExtensionZipPlan {
  manifest: ExtensionManifest;
  /** The top folder the extension sits in ('' at the root). */
  prefix: string;
  entries: number;
  unpackedBytes: number;
}

const S_IFMT = 0o170000;
const S_IFREG = 0o100000;
const S_IFDIR = 0o040000;
const MAX_MANIFEST_BYTES = 1024 * 1024;

interface Planned {
  entry: yauzl.Entry;
  parts: string[];
  isDir: boolean;
}

const fromBuffer = (zip: Buffer) =>
  new Promise<yauzl.ZipFile>((resolve, reject) =>
    yauzl.fromBuffer(zip, { lazyEntries: true, decodeStrings: false, validateEntrySizes: true }, (error, file) =>
      error ? reject(new ExtensionZipError('invalid_zip', `not a readable zip: ${error.message}`)) : resolve(file),
    ),
  );

/** An entry's name as safe relative components, or the refusal naming it. */
export function entryParts(name: string): string[] {
  const unsafe = (why: string) => new ExtensionZipError('unsafe_entry', `zip entry ${JSON.stringify(name)} ${why}`);
  // eslint-disable-next-line no-control-regex -- refusing NUL and control characters is the point
  if (/[\u0000-\u001f\\]/.test(name)) throw unsafe('holds a backslash or a control character');
  if (name.startsWith('/') || /^[A-Za-z]:/.test(name)) throw unsafe('is absolute');
  const parts = name.split('/').filter((part) => part !== '' && part !== '.');
  if (parts.includes('..')) throw unsafe('leaves its directory (..)');
  if (parts.length === 0) throw unsafe('is empty');
  return parts;
}

function typeOf(entry: yauzl.Entry, name: string): 'file' | 'dir' {
  const mode = (entry.externalFileAttributes >>> 16) & S_IFMT;
  const isDir = name.endsWith('/');
  // Zips made on other systems carry no Unix mode (0): then the name says what it is.
  if (mode === 0 || (mode === S_IFDIR && isDir) || (mode === S_IFREG && !isDir)) return isDir ? 'dir' : 'file';
  throw new ExtensionZipError('unsafe_entry', `zip entry ${JSON.stringify(name)} is a link or a special file; only files and folders are accepted`);
}

async function readEntries(zip: yauzl.ZipFile, limits: ExtensionZipLimits): Promise<Planned[]> {
  if (zip.entryCount > limits.maxEntries) {
    throw new ExtensionZipError('too_large', `the zip holds ${zip.entryCount} entries; at most ${limits.maxEntries} are allowed`);
  }
  const planned: Planned[] = [];
  await new Promise<void>((resolve, reject) => {
    zip.on('entry', (entry: yauzl.Entry) => {
      try {
        const name = (entry.fileName as unknown as Buffer).toString('utf8');
        planned.push({ entry, parts: entryParts(name), isDir: typeOf(entry, name) === 'dir' });
        zip.readEntry();
      } catch (error) {
        reject(error instanceof Error ? error : new Error(String(error)));
      }
    });
    zip.once('end', () => resolve());
    zip.once('error', (error: Error) => reject(new ExtensionZipError('invalid_zip', `the zip is damaged: ${error.message}`)));
    zip.readEntry();
  });
  const total = planned.reduce((sum, { entry }) => sum + entry.uncompressedSize, 0);
  if (total > limits.maxUnpackedBytes) {
    throw new ExtensionZipError('too_large', `the zip expands to ${total} bytes; at most ${limits.maxUnpackedBytes} are allowed`);
  }
  return planned;
}

/** Where manifest.json is: at the root, else under the one top folder every entry shares. */
function manifestEntry(planned: Planned[]): { entry: yauzl.Entry; prefix: string } {
  const files = planned.filter((p) => !p.isDir);
  const atRoot = files.find((p) => p.parts.length === 1 && p.parts[0] === 'manifest.json');
  if (atRoot) return { entry: atRoot.entry, prefix: '' };
  const tops = new Set(planned.map((p) => p.parts[0]));
  const [top] = [...tops];
  const nested = tops.size === 1 ? files.find((p) => p.parts.length === 2 && p.parts[1] === 'manifest.json') : undefined;
  if (top !== undefined && nested) return { entry: nested.entry, prefix: top };
  throw new ExtensionZipError('manifest_missing', 'manifest.json is missing: it must sit at the root of the zip or in its one top folder');
}

const openEntry = (zip: yauzl.ZipFile, entry: yauzl.Entry) =>
  new Promise<Readable>((resolve, reject) =>
    zip.openReadStream(entry, (error, stream) => (error ? reject(new ExtensionZipError('invalid_zip', `a zip entry cannot be read: ${error.message}`)) : resolve(stream))),
  );

async function readManifest(zip: yauzl.ZipFile, entry: yauzl.Entry): Promise<ExtensionManifest> {
  if (entry.uncompressedSize > MAX_MANIFEST_BYTES) throw new ExtensionZipError('invalid_manifest', `manifest.json is larger than ${MAX_MANIFEST_BYTES} bytes`);
  const chunks: Buffer[] = [];
  try {
    for await (const chunk of await openEntry(zip, entry)) chunks.push(chunk as Buffer);
  } catch (error) {
    throw error instanceof ExtensionZipError ? error : new ExtensionZipError('invalid_zip', `manifest.json cannot be read: ${(error as Error).message}`);
  }
  return parseManifest(Buffer.concat(chunks).toString('utf8'));
}

/** The manifest's fields this service needs, or the refusal saying what is wrong. */
export function parseManifest(text: string): ExtensionManifest {
  let raw: unknown;
  try {
    raw = JSON.parse(text.replace(/^\uFEFF/, ''));
  } catch (error) {
    throw new ExtensionZipError('invalid_manifest', `manifest.json is not valid JSON: ${(error as Error).message}`);
  }
  const manifest = (raw && typeof raw === 'object' ? raw : {}) as Record<string, unknown>;
  const { manifest_version: mv, name, version } = manifest;
  if (mv !== 2 && mv !== 3) throw new ExtensionZipError('invalid_manifest', 'manifest.json must have manifest_version 2 or 3');
  if (typeof name !== 'string' || name.trim() === '') throw new ExtensionZipError('invalid_manifest', 'manifest.json must have a name');
  if (typeof version !== 'string' || version.trim() === '') throw new ExtensionZipError('invalid_manifest', 'manifest.json must have a version');
  return { name, version, manifestVersion: mv };
}

/** Checks a zip without writing anything. */
export async function inspectExtensionZip(zipBytes: Buffer, limits: ExtensionZipLimits = DEFAULT_EXTENSION_ZIP_LIMITS): Promise<ExtensionZipPlan> {
  const zip = await fromBuffer(zipBytes);
  try {
    const planned = await readEntries(zip, limits);
    const { entry, prefix } = manifestEntry(planned);
    const manifest = await readManifest(zip, entry);
    return { manifest, prefix, entries: planned.length, unpackedBytes: planned.reduce((sum, p) => sum + p.entry.uncompressedSize, 0) };
  } finally {
    zip.close();
  }
}

/**
 * Unpacks the extension into `target` (created; it must not exist), the top folder
 * stripped when the manifest sits in one. Files are created with O_EXCL ('wx'), so a
 * repeated entry cannot write through what the first left; modes are 0644 and 0755.
 */
export async function extractExtensionZip(zipBytes: Buffer, target: string, limits: ExtensionZipLimits = DEFAULT_EXTENSION_ZIP_LIMITS): Promise<ExtensionZipPlan> {
  const plan = await inspectExtensionZip(zipBytes, limits);
  const zip = await fromBuffer(zipBytes);
  try {
    await mkdir(target, { mode: 0o755 });
    for (const { entry, parts, isDir } of await readEntries(zip, limits)) {
      const inside = plan.prefix === '' ? parts : parts.slice(1);
      if (inside.length === 0) continue;
      const dest = path.join(target, ...inside);
      if (isDir) {
        await mkdir(dest, { recursive: true, mode: 0o755 });
        continue;
      }
      await mkdir(path.dirname(dest), { recursive: true, mode: 0o755 });
      await pipeline(await openEntry(zip, entry), createWriteStream(dest, { flags: 'wx', mode: 0o644 }));
    }
  } finally {
    zip.close();
  }
  return plan;
}

/**
 * A CRX package (the Chrome Web Store's format) as the zip inside it: CRX3 is
 * "Cr24", version 3, a header length and a protobuf header; CRX2 is "Cr24", version 2,
 * the key and signature lengths, the key and the signature. Undefined when it is neither.
 */
export function zipOfCrx(crx: Buffer): Buffer | undefined {
  if (crx.length < 16 || crx.toString('latin1', 0, 4) !== 'Cr24') return undefined;
  const version = crx.readUInt32LE(4);
  const start = version === 3 ? 12 + crx.readUInt32LE(8) : version === 2 ? 16 + crx.readUInt32LE(8) + crx.readUInt32LE(12) : -1;
  if (start < 0 || start > crx.length) return undefined;
  return crx.subarray(start);
}
