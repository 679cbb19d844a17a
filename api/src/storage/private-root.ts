import { chmod, mkdir } from 'node:fs/promises';
import path from 'node:path';

/**
 * What the file stores (profiles, recordings) share: a root directory that only the
 * service can enter (browsers run as session uids on this host, and stored profiles and
 * recordings are theirs to read only through the API), made on first use, and paths built
 * only from ids we generated.
 */

const SAFE_SEGMENT = /^[A-Za-z0-9_-]{1,128}$/;

/** Makes `root` (mode 0700) once; a failure is retried by the next call. */
export function privateRoot(root: string): () => Promise<void> {
  let rootReady: Promise<void> | undefined;
  return () =>
    (rootReady ??= (async () => {
      await mkdir(root, { recursive: true, mode: 0o700 });
      try {
        await chmod(root, 0o700);
      } catch (error) {
        // A volume's mount point (a pod's emptyDir or claim: root's, group fsGroup) cannot be
        // changed by the service's uid: it keeps the volume's mode, and what the stores make
        // under it (one directory per org, mode 0700) is the service's own.
        if ((error as NodeJS.ErrnoException).code !== 'EPERM') throw error;
      }
    })().catch((error: unknown) => {
      rootReady = undefined;
      throw error;
    }));
}

/** `root/<segment>/…`; a segment that is not a plain token is refused, never turned into a path. */
export function pathUnder(root: string, kind: string, segments: string[]): string {
  return path.join(root, ...safeSegments(kind, segments));
}

/** The segments, each checked to be a plain token (the object stores build keys from them too). */
export function safeSegments(kind: string, segments: string[]): string[] {
  for (const segment of segments) {
    if (!SAFE_SEGMENT.test(segment)) throw new Error(`unsafe ${kind} path segment ${JSON.stringify(segment)}`);
  }
  return segments;
}
