import { DeleteObjectCommand, GetObjectCommand, HeadObjectCommand, S3Client, S3ServiceException } from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import { Readable } from 'node:stream';
import type { S3StoreSettings } from '../config-storage.js';
import type { ByteRange } from '../ports/replay-store.js';
import { safeSegments } from './private-root.js';

/**
 * The few object operations the S3 stores need, over one bucket and key prefix. Bodies
 * stream both ways: an upload holds at most QUEUE_SIZE parts of PART_BYTES in memory
 * (lib-storage's multipart upload; one PUT when the body is smaller than a part), and a
 * download is the response body itself. Either way the object appears whole or not at
 * all: S3 publishes a PUT or a completed multipart upload atomically.
 */

/** lib-storage's part size: also the most an upload buffers per part in flight. */
const PART_BYTES = 8 * 1024 * 1024;
const QUEUE_SIZE = 2;

export interface S3Bucket {
  /** `<prefix><area>/<segment>/…<suffix>`; a segment that is not a plain token is refused. */
  key(area: 'profiles' | 'replays', kind: string, segments: string[], suffix: string): string;
  /** The object (or its `range`) and its whole size, or undefined when there is none. */
  get(key: string, range?: ByteRange): Promise<{ body: Readable; sizeBytes: number } | undefined>;
  exists(key: string): Promise<boolean>;
  /** Streams `body` into the object, replacing it once whole; on an error nothing is kept. */
  put(key: string, body: Readable): Promise<void>;
  /** Removes the object; succeeds when there is none. */
  delete(key: string): Promise<void>;
}

/** A client for the settings; credentials come from the SDK's default chain (env, web identity). */
export function s3ClientOf(settings: S3StoreSettings): S3Client {
  return new S3Client({
    region: settings.region,
    ...(settings.endpoint ? { endpoint: settings.endpoint } : {}),
    forcePathStyle: settings.forcePathStyle,
    // Checksums only where S3 requires them: several S3-compatible servers refuse the
    // SDK's default trailing checksums on streamed uploads.
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
  });
}

export function s3BucketOf(client: S3Client, settings: Pick<S3StoreSettings, 'bucket' | 'prefix'>): S3Bucket {
  const Bucket = settings.bucket;
  return {
    key(area, kind, segments, suffix) {
      return `${settings.prefix}${area}/${safeSegments(kind, segments).join('/')}${suffix}`;
    },
    async get(Key, range) {
      try {
        const out = await client.send(new GetObjectCommand({ Bucket, Key, ...(range ? { Range: `bytes=${range.start}-${range.end}` } : {}) }));
        const body = out.Body instanceof Readable ? out.Body : Readable.from([]);
        return { body, sizeBytes: range ? totalOf(out.ContentRange) : Number(out.ContentLength ?? 0) };
      } catch (error) {
        if (isMissing(error)) return undefined;
        // A range past the end (the object is shorter than its row says): no bytes, as a file read gives.
        if (range && statusOf(error) === 416) {
          const whole = await this.get(Key);
          whole?.body.destroy();
          return whole && { body: Readable.from([]), sizeBytes: whole.sizeBytes };
        }
        throw error;
      }
    },
    async exists(Key) {
      try {
        await client.send(new HeadObjectCommand({ Bucket, Key }));
        return true;
      } catch (error) {
        if (isMissing(error)) return false;
        throw error;
      }
    },
    async put(Key, body) {
      const upload = new Upload({ client, params: { Bucket, Key, Body: body }, partSize: PART_BYTES, queueSize: QUEUE_SIZE });
      await upload.done();
    },
    async delete(Key) {
      await client.send(new DeleteObjectCommand({ Bucket, Key }));
    },
  };
}

function statusOf(error: unknown): number | undefined {
  return error instanceof S3ServiceException ? error.$metadata.httpStatusCode : undefined;
}

function isMissing(error: unknown): boolean {
  return statusOf(error) === 404 || (error instanceof Error && (error.name === 'NoSuchKey' || error.name === 'NotFound'));
}

/** The whole size from a `Content-Range: bytes s-e/total` header. */
function totalOf(contentRange: string | undefined): number {
  const total = /\/(\d+)$/.exec(contentRange ?? '')?.[1];
  if (total === undefined) throw new Error(`S3 answered a range read without a total size (${String(contentRange)})`);
  return Number(total);
}
