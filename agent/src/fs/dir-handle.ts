import { constants } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import type { FsLimits } from '../config.js';

/**
 * Open directories and the part of the session root a tree walk needs (TreeRoot), apart
 * from session-root.ts: the walk and the quota's measure work on any TreeRoot, and the
 * SessionRoot, which is one, owns a Quota, so neither imports the other's module back.
 */

const { O_RDONLY, O_DIRECTORY, O_NOFOLLOW } = constants;
export const DIR_FLAGS = O_RDONLY | O_DIRECTORY | O_NOFOLLOW;

export interface Owner {
  uid: number;
  gid: number;
}

export class DirHandle {
  constructor(
    readonly handle: FileHandle,
    /** The real host path of the open directory, checked to be under the root. */
    readonly hostPath: string,
  ) {}

  /** A path that resolves `name` relative to this open directory, like openat(fd, name). */
  child(name: string): string {
    return `/proc/self/fd/${this.handle.fd}/${name}`;
  }

  close(): Promise<void> {
    return this.handle.close();
  }
}

/** What a walk of the browser's files asks of its root (SessionRoot is the one there is). */
export interface TreeRoot {
  readonly limits: FsLimits;
  /** 400 path_too_deep for a path with more components below "/" than the limit. */
  checkDepth(depth: number, virtualPath: string): void;
  /** The real path behind an open descriptor, refused unless it lies under the root. */
  verify(handle: FileHandle, virtualPath: string): Promise<string>;
  /** Opens the directory at `components` below "/", one component at a time. */
  openDir(components: string[], options?: { createMode?: number }): Promise<DirHandle>;
}
