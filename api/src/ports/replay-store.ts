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

/** Inclusive byte offsets, as an HTTP Range request names them. */
export interface ByteRange {
  start: number;
  end: number;
}

export interface ReplayStore {
  /**
   * Stores `body` as the replay's video, at most `maxBytes` (else ReplayTooLargeError and
   * nothing is kept). Atomic: a reader sees the whole file or none.
   */
  save(ref: ReplayRef, body: Readable, maxBytes: number): Promise<{ sizeBytes: number }>;
  /**
   * The stored video and its whole size, or undefined when there is none. With `range`
   * (inclusive byte offsets, within the size) the stream holds only those bytes.
   */
  open(ref: ReplayRef, range?: ByteRange): Promise<{ stream: Readable; sizeBytes: number } | undefined>;
  /** Removes the video; succeeds when there is none. */
  delete(ref: ReplayRef): Promise<void>;
}
