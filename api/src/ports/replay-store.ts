import type { Readable } from 'node:stream';

/**
 * The ReplayStore port: where finished session recordings (MP4 files) live, beside the
 * ProfileStore. Embedded mode keeps them as files under the data dir
 * (storage/file-replay-store.ts); a Kubernetes deployment backs the same interface with a
 * volume or object storage.
 */
export interface ReplayRef {
  orgId: string;
  projectId: string;
  replayId: string;
}

/** An upload larger than the store was told to take; nothing of it is kept. */
export class ReplayTooLargeError extends Error {
  override readonly name = 'ReplayTooLargeError';
}

export interface ReplayStore {
  /**
   * Stores `body` as the replay's video, at most `maxBytes` (else ReplayTooLargeError and
   * nothing is kept). Atomic: a reader sees the whole file or none.
   */
  save(ref: ReplayRef, body: Readable, maxBytes: number): Promise<{ sizeBytes: number }>;
  /** The stored video and its size, or undefined when there is none. */
  open(ref: ReplayRef): Promise<{ stream: Readable; sizeBytes: number } | undefined>;
  /** Removes the video; succeeds when there is none. */
  delete(ref: ReplayRef): Promise<void>;
}
