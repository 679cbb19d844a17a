import path from 'node:path';
import { readdir } from 'node:fs/promises';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { extract as extractTar, Pack, type ReadEntry } from 'tar';

/**
 * Profile archives: a Chromium user-data dir as a tar, the form in which profiles travel
 * between the service and the agent. Both ends extract archives they did not write (the
 * service takes the agent's upload, the agent takes the stored profile), so both use the
 * same rules here: the service may import this pure module, the agent must not import
 * service code.
 */

/** Archives refused for what they contain; the message names the first offending entry. */
export class UnsafeArchiveError extends Error {
  override readonly name = 'UnsafeArchiveError';
  constructor(
    message: string,
    readonly reason: 'unsafe_entry' | 'too_large' | 'not_a_tar',
  ) {
    super(message);
  }
}

export interface ArchiveLimits {
  /** Bytes of the archive itself, counted as they arrive. */
  maxArchiveBytes: number;
  /** Sum of the entries' sizes. */
  maxContentBytes: number;
  maxEntries: number;
}

/**
 * A working profile is a few MB once caches are left out; a profile that has seen heavy
 * sites (IndexedDB, many origins) can reach hundreds. 2 GiB leaves room for those and
 * still stops a runaway upload from filling the disk.
 */
export const PROFILE_LIMITS: ArchiveLimits = {
  maxArchiveBytes: 2 * 1024 ** 3,
  maxContentBytes: 2 * 1024 ** 3,
  maxEntries: 200_000,
};

/** The kinds a profile may hold; hard links, devices and FIFOs have no business in one. */
const ALLOWED_TYPES = new Set(['File', 'OldFile', 'ContiguousFile', 'Directory', 'SymbolicLink']);

/** Why an entry is refused, or undefined when it is fine. Pure: the rule in one place. */
export function entryViolation(entry: { path: string; type: string; linkpath?: string | undefined }): string | undefined {
  const name = entry.path;
  if (!ALLOWED_TYPES.has(entry.type)) return `${JSON.stringify(name)} is a ${entry.type}, which a profile may not contain`;
  if (name.includes('\0') || name.includes('\\')) return `${JSON.stringify(name)} contains a NUL or a backslash`;
  if (name.startsWith('/')) return `${JSON.stringify(name)} is an absolute path`;
  if (name.split('/').includes('..')) return `${JSON.stringify(name)} contains ".."`;
  if (entry.type === 'SymbolicLink') {
    const target = entry.linkpath ?? '';
    if (target === '' || target.includes('\0')) return `symlink ${JSON.stringify(name)} has an empty or invalid target`;
    if (target.startsWith('/')) return `symlink ${JSON.stringify(name)} points to the absolute path ${JSON.stringify(target)}`;
    const resolved = path.posix.normalize(path.posix.join(path.posix.dirname(name), target));
    if (resolved === '..' || resolved.startsWith('../')) return `symlink ${JSON.stringify(name)} points outside the profile (${JSON.stringify(target)})`;
  }
  return undefined;
}

/**
 * Extracts a tar into `targetDir` (which must exist), refusing the whole archive on the
 * first entry that breaks the rules above or a limit. Refused entries are never written;
 * entries before them may be, so callers extract into a directory they discard on failure.
 * node-tar's own guards (no writing through symlinks, no paths escaping the target) stay
 * on underneath, and in strict mode any warning of theirs is an error too.
 */
export async function extractArchive(source: Readable, targetDir: string, limits: ArchiveLimits = PROFILE_LIMITS): Promise<{ entries: number; bytes: number }> {
  let violation: UnsafeArchiveError | undefined;
  let entries = 0;
  let bytes = 0;
  let received = 0;
  const counter = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      received += chunk.length;
      if (received > limits.maxArchiveBytes) return done(new UnsafeArchiveError(`the archive is larger than ${limits.maxArchiveBytes} bytes`, 'too_large'));
      done(null, chunk);
    },
  });
  const refuse = (error: UnsafeArchiveError) => {
    violation ??= error;
    return false;
  };
  const unpack = extractTar({
    cwd: targetDir,
    strict: true,
    // Owners come from the extracting side (the agent chowns to the browser's user), and
    // absolute paths and ".." were refused above, never rewritten.
    preserveOwner: false,
    preservePaths: false,
    filter: (_path: string, entry: ReadEntry | { size?: number }) => {
      if (violation) return false;
      const e = entry as ReadEntry;
      const problem = entryViolation({ path: e.path, type: e.type, linkpath: e.linkpath });
      if (problem) return refuse(new UnsafeArchiveError(problem, 'unsafe_entry'));
      entries += 1;
      bytes += e.size ?? 0;
      if (entries > limits.maxEntries) return refuse(new UnsafeArchiveError(`the archive has more than ${limits.maxEntries} entries`, 'too_large'));
      if (bytes > limits.maxContentBytes) return refuse(new UnsafeArchiveError(`the archive holds more than ${limits.maxContentBytes} bytes`, 'too_large'));
      // No setuid, setgid or sticky bits from someone else's archive.
      if (typeof e.mode === 'number') e.mode &= 0o777;
      return true;
    },
  });
  try {
    await pipeline(source, counter, unpack);
  } catch (error) {
    if (error instanceof UnsafeArchiveError) throw error;
    const code = (error as { tarCode?: string }).tarCode;
    if (code === 'TAR_BAD_ARCHIVE' || code === 'TAR_ENTRY_INVALID') throw new UnsafeArchiveError(`not a valid tar archive: ${(error as Error).message}`, 'not_a_tar');
    if (code) throw new UnsafeArchiveError(`the archive was refused: ${(error as Error).message}`, 'unsafe_entry');
    throw error;
  }
  if (violation) throw violation;
  return { entries, bytes };
}

/**
 * What a saved profile leaves out: caches Chromium rebuilds on its own, files that only
 * mean something to the process that wrote them (singleton lock, socket and cookie, the
 * DevTools port, lock files) and crash and metrics data. Matched against every path
 * segment, so `Default/Cache` and `Profile 1/Cache` both go.
 */
export const PROFILE_EXCLUDED_NAMES: ReadonlySet<string> = new Set([
  'Cache',
  'cache',
  'Code Cache',
  'GPUCache',
  'GPUPersistentCache',
  'ShaderCache',
  'GrShaderCache',
  'GraphiteDawnCache',
  'DawnCache',
  'DawnGraphiteCache',
  'DawnWebGPUCache',
  'Service Worker',
  'component_crx_cache',
  'extensions_crx_cache',
  'optimization_guide_model_store',
  'Safe Browsing',
  'Crashpad',
  'Crash Reports',
  'BrowserMetrics',
  'BrowserMetrics-spare.pma',
  'DevToolsActivePort',
  'SingletonLock',
  'SingletonSocket',
  'SingletonCookie',
  'lockfile',
  'LOCK',
]);

export function isExcludedFromProfile(relativePath: string): boolean {
  return relativePath.split('/').some((segment) => PROFILE_EXCLUDED_NAMES.has(segment));
}

/**
 * The user-data dir as a tar stream: paths relative to its root, without the excluded
 * names, without sockets and FIFOs, with portable headers (no owner names or ids, which
 * mean nothing on the other side).
 */
export async function packProfile(userDataDir: string): Promise<Readable> {
  const top = (await readdir(userDataDir)).filter((name) => !isExcludedFromProfile(name)).sort();
  const pack = new Pack({
    cwd: userDataDir,
    portable: true,
    filter: (entryPath, stat) => {
      if (isExcludedFromProfile(entryPath.replace(/^\.\//, ''))) return false;
      return 'isFile' in stat ? stat.isFile() || stat.isDirectory() || stat.isSymbolicLink() : true;
    },
  });
  // Pack.add, unlike tar.create, reads no `@archive` names specially and takes no entries.
  for (const name of top) pack.add(name);
  pack.end();
  return Readable.from(pack);
}
