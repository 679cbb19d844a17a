import type { ReplayStore } from '../ports/replay-store.js';
import { replaySizeLimit } from './byte-limit.js';
import type { S3Bucket } from './s3-bucket.js';

/**
 * Replays as objects: `<prefix>replays/<org>/<project>/<replay>.mp4`, the file store's
 * layout under a key prefix. An upload streams into the object (a multipart upload past
 * one part) and appears only once whole; one over `maxBytes` is abandoned and nothing
 * of it is kept. Range reads are S3 range GETs.
 */
export function createS3ReplayStore(bucket: S3Bucket): ReplayStore {
  const keyOf = (ref: { orgId: string; projectId: string; replayId: string }) =>
    bucket.key('replays', 'replay', [ref.orgId, ref.projectId, ref.replayId], '.mp4');

  return {
    async save(ref, body, maxBytes) {
      const key = keyOf(ref);
      const { stream: counter, bytes } = replaySizeLimit(maxBytes);
      body.on('error', (error) => counter.destroy(error));
      try {
        await bucket.put(key, body.pipe(counter));
      } catch (error) {
        // The upload's own error may hide the cause: the size limit is what the caller acts on.
        throw counter.errored ?? error;
      }
      return { sizeBytes: bytes() };
    },
    async open(ref, range) {
      const object = await bucket.get(keyOf(ref), range);
      return object && { stream: object.body, sizeBytes: object.sizeBytes };
    },
    async delete(ref) {
      await bucket.delete(keyOf(ref));
    },
  };
}
