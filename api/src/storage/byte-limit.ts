import { Transform } from 'node:stream';
import { ReplayTooLargeError } from '../ports/replay-store.js';

/**
 * A pass-through that counts a recording's bytes as they go to a store and fails with
 * ReplayTooLargeError once they pass `maxBytes`. The file and S3 replay stores both write
 * through it; `bytes()` is the size written.
 */
export function replaySizeLimit(maxBytes: number): { stream: Transform; bytes: () => number } {
  let size = 0;
  const stream = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      size += chunk.length;
      if (size > maxBytes) return done(new ReplayTooLargeError(`the video is larger than ${maxBytes} bytes`));
      done(null, chunk);
    },
  });
  return { stream, bytes: () => size };
}
