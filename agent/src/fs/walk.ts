import type { Stats } from 'node:fs';
import { lstat, open, readdir } from 'node:fs/promises';
import { FsError, fromErrno, tooLarge } from './errors.js';
import { DIR_FLAGS, DirHandle, type TreeRoot } from './dir-handle.js';

/**
 * A bounded walk of a directory tree, for download_dir_zip and the quota's measure.
 *
 * Each subdirectory is opened relative to its parent's open descriptor (like openat), so a
 * walk costs one open per directory. The old walk reopened every directory from "/", one
 * component at a time: O(depth²) opens, which is what kept the agent busy for minutes on a
 * 1,500-level chain. Every call is asynchronous (libuv's pool), so the event loop serves
 * /health and other requests between them; depth and entry count are bounded by the
 * session's limits (400 path_too_deep, 413 too_many_entries), so one walk's length is too.
 * At most `depth` descriptors are open at once.
 */

export interface WalkEntry {
  /** Path relative to the walked directory, "/"-separated, no leading "/". */
  rel: string;
  /** Real host path of the directory holding the entry, checked to be under the root. */
  parentHost: string;
  name: string;
  info: Stats;
}

export interface WalkOptions {
  /** The walked directory's virtual path, for messages ("" for "/"). */
  base?: string;
  /** The error for a directory past the depth limit (default: 400 path_too_deep naming it). */
  tooDeep?: (virtualPath: string) => FsError;
}

interface WalkState extends WalkOptions {
  root: TreeRoot;
  entries: number;
  visit: (entry: WalkEntry) => void;
}

/** Visits every entry under `dir` (already open, at `depth` below "/"); symlinks are reported, never followed. */
export async function walkTree(root: TreeRoot, dir: DirHandle, depth: number, visit: (entry: WalkEntry) => void, options: WalkOptions = {}): Promise<void> {
  await walkDir({ root, entries: 0, visit, ...options }, dir, '', depth);
}

async function walkDir(state: WalkState, dir: DirHandle, rel: string, depth: number): Promise<void> {
  const names = (await readdir(dir.child(''))).sort();
  for (const name of names) {
    if (++state.entries > state.root.limits.maxWalkEntries) {
      throw tooLarge('too_many_entries', `the tree has more than ${state.root.limits.maxWalkEntries} entries (the walk limit)`);
    }
    const info = await lstat(dir.child(name)).catch(() => undefined);
    if (!info) continue;
    const entryRel = `${rel}${name}`;
    state.visit({ rel: entryRel, parentHost: dir.hostPath, name, info });
    if (!info.isDirectory()) continue;
    if (depth + 1 > state.root.limits.maxDepth) {
      const virtual = state.base === undefined ? `…/${entryRel}` : `${state.base}/${entryRel}`;
      if (state.tooDeep) throw state.tooDeep(virtual);
      state.root.checkDepth(depth + 1, virtual);
    }
    const child = await openChild(state.root, dir, name, entryRel);
    if (!child) continue;
    try {
      await walkDir(state, child, `${entryRel}/`, depth + 1);
    } finally {
      await child.close();
    }
  }
}

/** A subdirectory opened from its parent, or undefined when it vanished or became something else. */
async function openChild(root: TreeRoot, dir: DirHandle, name: string, rel: string): Promise<DirHandle | undefined> {
  let handle;
  try {
    handle = await open(dir.child(name), DIR_FLAGS);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR' || code === 'ELOOP') return undefined;
    const mapped = fromErrno(error, rel);
    throw mapped instanceof FsError ? mapped : error;
  }
  return new DirHandle(handle, await root.verify(handle, rel));
}
