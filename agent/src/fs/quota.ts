import { FsError, tooLarge } from './errors.js';
import type { TreeRoot } from './dir-handle.js';
import { walkTree } from './walk.js';

/**
 * The per-session disk quota (AGENT_FS_QUOTA_MB) over everything under "/": what the
 * API writes and what Chromium downloads.
 *
 * Measured per request: every writing request starts by walking "/" (bounded by the walk
 * limits) and summing file sizes, then counts its bytes as they arrive. The trade-off:
 * a walk per write (about 1 ms per few hundred entries, off the event loop) instead of a
 * running total, but the figure is never stale — what Chromium downloaded or a client
 * deleted since is seen at once, and nothing can drift. Requests in flight are counted
 * together (`inflight`), and bytes of requests that finished after a meter's walk are
 * added to it (`finished`), so concurrent writes cannot each pass on the same headroom.
 * Deletes are seen by the next walk. Sizes are apparent sizes (st_size): what a client
 * wrote or can read back.
 */

export class Quota {
  inflight = 0;
  finished = 0;

  constructor(private readonly root: TreeRoot) {}

  get limit(): number {
    return this.root.limits.quotaBytes;
  }

  /** Bytes under "/" now (regular files only; directories and links count 0). */
  async usage(): Promise<number> {
    const dir = await this.root.openDir([]);
    let total = 0;
    try {
      await walkTree(
        this.root,
        dir,
        0,
        (entry) => {
          if (entry.info.isFile()) total += entry.info.size;
        },
        { base: '', tooDeep: (virtual) => this.tooDeep(virtual) },
      );
    } finally {
      await dir.close();
    }
    return total;
  }

  /**
   * A directory under "/" past the depth limit (only something with the browser's own
   * user can make one: every API route checks depth) stops the measure, so every write is
   * refused until it goes. The walk is not cut short there: what lies deeper would go
   * uncounted, a place to keep bytes past the quota. The error names the directory to
   * delete, whole (no 200-character cut), since that is the way out.
   */
  private tooDeep(virtual: string): FsError {
    const { maxDepth } = this.root.limits;
    // Its parent, at the limit: a path the API can still name (the deeper one it cannot).
    const top = virtual.split('/').slice(0, maxDepth + 1).join('/');
    return new FsError(
      400,
      'path_too_deep',
      `the browser's files hold a directory more than ${maxDepth} levels below "/", so their size cannot be measured for the quota and writes are refused; delete ${top} (delete_directory) or move it higher to write again`,
    );
  }

  /** A meter for one request's writes, measured now (no walk when the quota is off). */
  async meter(): Promise<Meter> {
    return new Meter(this, this.limit === 0 ? 0 : await this.usage());
  }
}

export class Meter {
  private own = 0;
  private readonly finishedAtStart: number;

  constructor(
    private readonly quota: Quota,
    private base: number,
  ) {
    this.finishedAtStart = quota.finished;
  }

  /** Counts `bytes` about to be written; 413 quota_exceeded when they would pass the quota. */
  add(bytes: number): void {
    this.check(bytes);
    this.own += bytes;
    this.quota.inflight += bytes;
  }

  /** 413 quota_exceeded when `bytes` more would pass the quota; counts nothing. */
  check(bytes: number): void {
    const { quota } = this;
    if (quota.limit > 0) {
      const after = this.base + (quota.finished - this.finishedAtStart) + quota.inflight + bytes;
      if (after > quota.limit) {
        throw tooLarge('quota_exceeded', `the browser's files would take ${after} bytes, over its quota of ${quota.limit} bytes; delete files to make room`);
      }
    }
  }

  /** Bytes the request freed (a file it truncated before rewriting it). */
  credit(bytes: number): void {
    this.base = Math.max(0, this.base - bytes);
  }

  /** Bytes the request no longer holds (a spool it deleted): out of the count entirely. */
  drop(bytes: number): void {
    const dropped = Math.min(bytes, this.own);
    this.own -= dropped;
    this.quota.inflight -= dropped;
  }

  /** The request is over: its bytes are on disk, counted by later walks. */
  close(): void {
    this.quota.inflight -= this.own;
    this.quota.finished += this.own;
    this.own = 0;
  }
}
