import { lstat, mkdir, readdir } from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { Pack, Unpack } from 'tar';
import type { ProfileRef, ProfileStore } from '../ports/profile-store.js';
import type { S3Bucket } from './s3-bucket.js';

/**
 * Profiles as objects: `<prefix>profiles/<org>/<project>/<profile>.tar`, one tar of the
 * profile's files (the archive exportTar hands out, paths relative to the profile root,
 * symlinks kept as links). A save streams a fresh tar over the object with one PUT or
 * multipart upload, which S3 publishes atomically, so a reader gets the old profile or
 * the new one, never a mix and never nothing; a read in progress keeps the object it
 * started on. Nothing is held in this process: every API replica sees the same bucket.
 */
export function createS3ProfileStore(bucket: S3Bucket): ProfileStore {
  const keyOf = (ref: ProfileRef) => bucket.key('profiles', 'profile', [ref.orgId, ref.projectId, ref.profileId], '.tar');

  return {
    async restoreInto(ref, targetDir) {
      const object = await bucket.get(keyOf(ref));
      if (!object) return false;
      await mkdir(targetDir, { recursive: true });
      // The archive is one this store wrote; tar still refuses `..` and absolute paths.
      await pipeline(object.body, new Unpack({ cwd: targetDir, strict: true }));
      return true;
    },

    async saveFrom(ref, sourceDir) {
      const sizeBytes = await sizeOf(sourceDir);
      const pack = new Pack({
        cwd: sourceDir,
        portable: true,
        // Sockets, FIFOs and devices (a browser leaves some behind) cannot be stored.
        filter: (_path, stat) => !('isFile' in stat) || isStorable(stat),
      });
      // Pack.add, unlike tar.create, reads no `@archive` names specially.
      for (const entry of (await readdir(sourceDir)).sort()) pack.add(entry);
      pack.end();
      await bucket.put(keyOf(ref), Readable.from(pack));
      return { sizeBytes };
    },

    async exportTar(ref) {
      return (await bucket.get(keyOf(ref)))?.body;
    },

    async has(ref) {
      return bucket.exists(keyOf(ref));
    },

    async delete(ref) {
      await bucket.delete(keyOf(ref));
    },
  };
}

function isStorable(stats: { isFile(): boolean; isDirectory(): boolean; isSymbolicLink(): boolean }) {
  return stats.isFile() || stats.isDirectory() || stats.isSymbolicLink();
}

async function sizeOf(dir: string): Promise<number> {
  let total = 0;
  for (const entry of await readdir(dir, { withFileTypes: true, recursive: true })) {
    if (entry.isFile()) total += (await lstat(path.join(entry.parentPath, entry.name))).size;
  }
  return total;
}
