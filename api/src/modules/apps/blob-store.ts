import { Readable } from 'node:stream';
import type { Queryable } from '../../db/pool.js';
import { AppError } from '../../http/errors.js';

/**
 * A deployment's bytes in Postgres (Kubernetes mode: every API replica serves them, and
 * no shared volume is needed): its uploaded source and its built bundle, in 1 MiB rows,
 * written and read as streams.
 */
export type BlobKind = 'source' | 'bundle';
const CHUNK_BYTES = 1024 * 1024;

/** Replaces the blob with the stream's bytes; 413 past maxBytes. Call it in a transaction (all or nothing). */
export async function writeBlob(tx: Queryable, deploymentId: string, kind: BlobKind, from: AsyncIterable<Buffer | string>, maxBytes: number): Promise<number> {
  await tx.query(`DELETE FROM app_blobs WHERE deployment_id = $1 AND kind = $2`, [deploymentId, kind]);
  let seq = 0;
  let total = 0;
  let pending: Buffer[] = [];
  let pendingBytes = 0;
  const put = async (data: Buffer) => {
    await tx.query(`INSERT INTO app_blobs (deployment_id, kind, seq, data) VALUES ($1, $2, $3, $4)`, [deploymentId, kind, seq++, data]);
  };
  for await (const chunk of from) {
    const buffer = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
    total += buffer.length;
    if (total > maxBytes) throw new AppError(413, 'payload_too_large', `The ${kind} is larger than ${maxBytes} bytes`);
    pending.push(buffer);
    pendingBytes += buffer.length;
    while (pendingBytes >= CHUNK_BYTES) {
      const all = Buffer.concat(pending);
      await put(all.subarray(0, CHUNK_BYTES));
      pending = [all.subarray(CHUNK_BYTES)];
      pendingBytes = all.length - CHUNK_BYTES;
    }
  }
  if (pendingBytes > 0 || seq === 0) await put(Buffer.concat(pending));
  return total;
}

export async function hasBlob(db: Queryable, deploymentId: string, kind: BlobKind): Promise<boolean> {
  const { rows } = await db.query(`SELECT 1 FROM app_blobs WHERE deployment_id = $1 AND kind = $2 LIMIT 1`, [deploymentId, kind]);
  return rows.length > 0;
}

/** The blob as a stream, one chunk read at a time (undefined when there is none). */
export async function readBlob(db: Queryable, deploymentId: string, kind: BlobKind): Promise<Readable | undefined> {
  const { rows } = await db.query<{ seq: number }>(`SELECT seq FROM app_blobs WHERE deployment_id = $1 AND kind = $2 ORDER BY seq`, [deploymentId, kind]);
  if (rows.length === 0) return undefined;
  const seqs = rows.map((row) => row.seq);
  async function* chunks() {
    for (const seq of seqs) {
      const { rows: found } = await db.query<{ data: Buffer }>(`SELECT data FROM app_blobs WHERE deployment_id = $1 AND kind = $2 AND seq = $3`, [deploymentId, kind, seq]);
      if (!found[0]) throw new Error(`chunk ${seq} of the ${kind} of ${deploymentId} is gone`);
      yield found[0].data;
    }
  }
  return Readable.from(chunks());
}

export async function deleteBlobs(db: Queryable, deploymentId: string, kinds: readonly BlobKind[] = ['source', 'bundle']): Promise<void> {
  await db.query(`DELETE FROM app_blobs WHERE deployment_id = $1 AND kind = ANY($2::text[])`, [deploymentId, kinds]);
}
