import { randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdir, open, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { pathUnder, privateRoot } from './private-root.js';
import type { ReplayRef, ReplayStore } from '../ports/replay-store.js';
import { replaySizeLimit } from './byte-limit.js';


/**
 * Replays as files: `<root>/<org>/<project>/<replay>.mp4`. An upload is written to a
 * temporary name beside it and renamed into place once whole (rename is atomic), so a
 * download never sees half a video. The root is the service's alone (0700): browsers run
 * as other uids on this host.
 */
export function createFileReplayStore(root: string): ReplayStore {
  const ensureRoot = privateRoot(root);
  const fileOf = (ref: ReplayRef) => pathUnder(root, 'replay', [ref.orgId, ref.projectId, ref.replayId]) + '.mp4';

  return {
    async save(ref, body, maxBytes) {
      const file = fileOf(ref);
      await ensureRoot();
      await mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
      const partial = `${file}.${randomBytes(6).toString('hex')}.partial`;
      const { stream: counter, bytes } = replaySizeLimit(maxBytes);
      try {
        await pipeline(body, counter, createWriteStream(partial, { mode: 0o600 }));
        await rename(partial, file);
      } catch (error) {
        await rm(partial, { force: true });
        throw error;
      }
      return { sizeBytes: bytes() };
    },
    async open(ref, range) {
      const file = fileOf(ref);
      const handle = await open(file, 'r').catch((error: NodeJS.ErrnoException) => {
        if (error.code === 'ENOENT') return undefined;
        throw error;
      });
      if (!handle) return undefined;
      // Read through the open handle: a delete meanwhile cannot cut the download short.
      const { size } = await handle.stat();
      return { stream: handle.createReadStream(range ? { start: range.start, end: range.end } : {}), sizeBytes: size };
    },
    async delete(ref) {
      await rm(fileOf(ref), { force: true });
    },
  };
}
