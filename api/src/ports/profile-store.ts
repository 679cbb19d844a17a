import type { Readable } from 'node:stream';

/**
 * The ProfileStore port: where browser profiles (Chromium user-data dirs) live between
 * sessions. Embedded mode keeps them as directories under the data dir
 * (storage/file-profile-store.ts); a Kubernetes deployment backs the same interface with
 * a volume or object storage. Sessions restore a profile into a fresh user-data dir at
 * start and save it back at the end; the API streams it as a tar for download.
 */
export interface ProfileRef {
  orgId: string;
  projectId: string;
  profileId: string;
}

export interface ProfileStore {
  /** Copies the stored profile into `targetDir` (empty or missing); false when nothing is stored yet. */
  restoreInto(ref: ProfileRef, targetDir: string): Promise<boolean>;
  /**
   * Replaces the stored profile with the contents of `sourceDir`, atomically: readers see
   * the old profile or the new one, never a mix and never nothing. Sockets, FIFOs and
   * devices in `sourceDir` are skipped; symlinks are kept verbatim.
   */
  saveFrom(ref: ProfileRef, sourceDir: string): Promise<{ sizeBytes: number }>;
  /**
   * A tar of the stored files (paths relative to the profile root; symlinks stored as
   * links, never followed), or undefined when nothing is stored. The stream reads the
   * version that was current when it was asked for, even if a save replaces it meanwhile;
   * consume it to the end or destroy it, since it keeps that version alive until then.
   */
  exportTar(ref: ProfileRef): Promise<Readable | undefined>;
  /** Whether anything is stored (a session saved into the profile at least once). */
  has(ref: ProfileRef): Promise<boolean>;
  /** Removes the stored profile; succeeds when there is none. Ids that are not plain tokens are refused. */
  delete(ref: ProfileRef): Promise<void>;
}
