import { randomBytes } from 'node:crypto';
import type { Dirent } from 'node:fs';
import { cp, lstat, mkdir, readdir, readFile, rename, rm, rmdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import { Pack } from 'tar';
import { pathUnder, privateRoot } from './private-root.js';
import type { ProfileRef, ProfileStore } from '../ports/profile-store.js';

const POINTER = 'current';
const VERSION = /^v-[0-9a-f]{16}$/;

/**
 * Profiles as directories: `<root>/<org>/<project>/<profile>/` holds immutable version
 * directories (`v-<random>/`) and a `current` file naming the live one. A save copies
 * into a fresh version and then renames a new pointer over `current` (rename is atomic),
 * so a reader sees the old profile or the new one, never half of each, and never
 * nothing in between.
 *
 * A reader holds a lease on the version it resolved until it has copied or streamed it;
 * a replaced or deleted version is removed only once its last lease ends. Leases and the
 * per-profile write lock live in this process: the adapter serves embedded mode, which
 * is one process. A multi-replica deployment backs the port with something shared.
 */
export function createFileProfileStore(root: string): ProfileStore {
  const leases = new Map<string, number>();
  const retired = new Set<string>();
  const locks = new Map<string, Promise<unknown>>();
  // Browsers run as session uids on this host: stored profiles (cookies, logins) must be
  // the service's alone, wherever the operator put the directory.
  const ensureRoot = privateRoot(root);

  const dirOf = (ref: ProfileRef) => pathUnder(root, 'profile', [ref.orgId, ref.projectId, ref.profileId]);

  /** Runs writes to one profile one at a time (saves and deletes must not interleave). */
  const exclusive = async <T>(dir: string, work: () => Promise<T>): Promise<T> => {
    const previous = locks.get(dir) ?? Promise.resolve();
    const next = previous.catch(() => undefined).then(work);
    locks.set(dir, next);
    try {
      return await next;
    } finally {
      if (locks.get(dir) === next) locks.delete(dir);
    }
  };

  /** The live version directory, leased until `release` is called; undefined when nothing is stored. */
  const acquire = async (dir: string): Promise<{ version: string; release: () => Promise<void> } | undefined> => {
    for (;;) {
      const name = await readPointer(dir);
      if (!name) return undefined;
      const lease = leaseVersion(path.join(dir, name));
      // A save may have switched the pointer and retired this version before the lease
      // existed; once the pointer still names it with the lease held, it cannot go away.
      if ((await readPointer(dir)) === name) return lease;
      await lease.release();
    }
  };

  const leaseVersion = (version: string) => {
    leases.set(version, (leases.get(version) ?? 0) + 1);
    let released = false;
    const release = async () => {
      if (released) return;
      released = true;
      const left = (leases.get(version) ?? 1) - 1;
      if (left > 0) {
        leases.set(version, left);
        return;
      }
      leases.delete(version);
      if (retired.delete(version)) await removeVersion(version);
    };
    return { version, release };
  };

  /** Removes a version now, or when its last reader is done. */
  const retire = async (version: string) => {
    if (leases.has(version)) retired.add(version);
    else await removeVersion(version);
  };

  return {
    async restoreInto(ref, targetDir) {
      const lease = await acquire(dirOf(ref));
      if (!lease) return false;
      try {
        await mkdir(targetDir, { recursive: true });
        await cp(lease.version, targetDir, { recursive: true, verbatimSymlinks: true, preserveTimestamps: true, force: true });
        return true;
      } finally {
        await lease.release();
      }
    },

    async saveFrom(ref, sourceDir) {
      const dir = dirOf(ref);
      return exclusive(dir, async () => {
        await ensureRoot();
        await mkdir(dir, { recursive: true });
        const name = `v-${randomBytes(8).toString('hex')}`;
        const version = path.join(dir, name);
        try {
          await cp(sourceDir, version, {
            recursive: true,
            verbatimSymlinks: true,
            preserveTimestamps: true,
            errorOnExist: true,
            // Sockets, FIFOs and devices (a browser leaves some behind) cannot be stored.
            filter: async (src) => isStorable(await lstat(src)),
          });
          await mkdir(version, { recursive: true });
          const sizeBytes = await sizeOf(version);
          const previous = await readPointer(dir);
          const pointerTmp = path.join(dir, `${POINTER}.${name}.tmp`);
          await writeFile(pointerTmp, name);
          await rename(pointerTmp, path.join(dir, POINTER));
          if (previous) await retire(path.join(dir, previous));
          await sweep(dir, name);
          return { sizeBytes };
        } catch (error) {
          await rm(version, { recursive: true, force: true });
          throw error;
        }
      });
    },

    async exportTar(ref) {
      const lease = await acquire(dirOf(ref));
      if (!lease) return undefined;
      try {
        const pack = new Pack({ cwd: lease.version, portable: true });
        // Pack.add, unlike tar.create, reads no `@archive` names specially.
        for (const entry of (await readdir(lease.version)).sort()) pack.add(entry);
        pack.end();
        return Readable.from(releasedAfter(pack, lease.release));
      } catch (error) {
        await lease.release();
        throw error;
      }
    },

    async has(ref) {
      return (await readPointer(dirOf(ref))) !== undefined;
    },

    async delete(ref) {
      const dir = dirOf(ref);
      await exclusive(dir, async () => {
        const current = await readPointer(dir);
        await rm(path.join(dir, POINTER), { force: true });
        if (current) await retire(path.join(dir, current));
        await sweep(dir, undefined);
        // Leased versions stay until their readers finish; the directory goes when empty.
        await rmdir(dir).catch((error: NodeJS.ErrnoException) => {
          if (error.code !== 'ENOENT' && error.code !== 'ENOTEMPTY') throw error;
        });
      });
    },
  };

  /** Removes what a crash or an older layout left behind: everything but the live version and leased ones. */
  async function sweep(dir: string, live: string | undefined) {
    let entries: Dirent[];
    try {
      entries = await readdir(dir, { withFileTypes: true });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return;
      throw error;
    }
    for (const entry of entries) {
      if (entry.name === POINTER || entry.name === live) continue;
      const full = path.join(dir, entry.name);
      if (leases.has(full)) {
        retired.add(full);
        continue;
      }
      await rm(full, { recursive: true, force: true });
    }
  }
}

/** The version the pointer names, or undefined when nothing is stored. */
async function readPointer(dir: string): Promise<string | undefined> {
  try {
    const name = (await readFile(path.join(dir, POINTER), 'utf8')).trim();
    if (!VERSION.test(name)) throw new Error(`corrupt profile pointer in ${dir}: ${JSON.stringify(name)}`);
    return name;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
}

async function removeVersion(version: string) {
  await rm(version, { recursive: true, force: true });
}

function isStorable(stats: { isFile(): boolean; isDirectory(): boolean; isSymbolicLink(): boolean }) {
  return stats.isFile() || stats.isDirectory() || stats.isSymbolicLink();
}

/** Yields the pack's chunks and ends the lease when the consumer finishes or gives up. */
async function* releasedAfter(pack: AsyncIterable<Buffer>, release: () => Promise<void>) {
  try {
    for await (const chunk of pack) yield chunk;
  } finally {
    await release();
  }
}

async function sizeOf(dir: string): Promise<number> {
  let total = 0;
  for (const entry of await readdir(dir, { withFileTypes: true, recursive: true })) {
    if (entry.isFile()) total += (await lstat(path.join(entry.parentPath, entry.name))).size;
  }
  return total;
}
