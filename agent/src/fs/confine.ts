import { FsError, invalidPath, nameTooLong } from './errors.js';

/**
 * Pure path rules of the per-browser filesystem. The API client sees a tree rooted at
 * "/"; these functions turn its paths into components under that root and check results
 * against it. The I/O side (session-root.ts) applies them after every open.
 */

const MAX_PATH_BYTES = 4096;
/** NAME_MAX of Linux file systems: a longer component is ENAMETOOLONG at the first open. */
const MAX_NAME_BYTES = 255;

/** Components of an absolute virtual path; "/" is []. `..` is refused rather than clamped. */
export function virtualComponents(virtualPath: string): string[] {
  if (typeof virtualPath !== 'string' || !virtualPath.startsWith('/')) throw invalidPath(`path must be absolute (start with "/"): ${String(virtualPath)}`);
  if (virtualPath.includes('\0')) throw invalidPath('path must not contain NUL bytes');
  if (Buffer.byteLength(virtualPath) > MAX_PATH_BYTES) throw invalidPath(`path is longer than ${MAX_PATH_BYTES} bytes`);
  const parts = virtualPath.split('/').filter((part) => part !== '' && part !== '.');
  if (parts.includes('..')) throw invalidPath(`path must not contain "..": ${virtualPath}`);
  if (parts.some((part) => Buffer.byteLength(part) > MAX_NAME_BYTES)) throw nameTooLong(virtualPath.slice(0, 300));
  return parts;
}

/** The canonical form the API answers with: "/a/b", "/" for the root. */
export function canonicalPath(virtualPath: string): string {
  return `/${virtualComponents(virtualPath).join('/')}`;
}

/** True when `hostPath` is `root` itself or below it (both absolute, without trailing "/"). */
export function isInside(root: string, hostPath: string): boolean {
  return hostPath === root || hostPath.startsWith(root.endsWith('/') ? root : `${root}/`);
}

/** The virtual path of a host path under root, or undefined when it is outside. */
export function toVirtual(root: string, hostPath: string): string | undefined {
  if (!isInside(root, hostPath)) return undefined;
  const rest = hostPath.slice(root.length);
  return rest === '' ? '/' : rest;
}

/**
 * Octal "644"/"0755" → number. setuid, setgid and sticky are refused (400
 * mode_not_allowed) rather than stripped: a caller asking for them learns at once that
 * it did not get them, instead of finding a file that silently differs from its request.
 * Browser files have no use for them, and a setuid file is a way out of the sandbox.
 */
export function parseMode(mode: string | undefined, fallback: number): number {
  if (mode === undefined) return fallback;
  if (!/^[0-7]{3,4}$/.test(mode)) throw invalidPath(`mode must be 3 or 4 octal digits: ${mode}`);
  const bits = Number.parseInt(mode, 8);
  if (bits & 0o7000) throw new FsError(400, 'mode_not_allowed', `mode ${mode}: setuid, setgid and sticky bits are not allowed`);
  return bits;
}

const TYPE_CHARS: Record<number, string> = { 0o040000: 'd', 0o120000: 'l', 0o020000: 'c', 0o060000: 'b', 0o010000: 'p', 0o140000: 's' };

/** `ls -l` style: "-rw-r--r--", "drwxr-xr-x", with s/S/t/T for the special bits. */
export function symbolicMode(mode: number): string {
  const type = TYPE_CHARS[mode & 0o170000] ?? '-';
  const triplet = (bits: number, special: boolean, specialChar: string) => {
    const exec = bits & 1 ? (special ? specialChar : 'x') : special ? specialChar.toUpperCase() : '-';
    return `${bits & 4 ? 'r' : '-'}${bits & 2 ? 'w' : '-'}${exec}`;
  };
  return (
    type +
    triplet((mode >> 6) & 7, (mode & 0o4000) !== 0, 's') +
    triplet((mode >> 3) & 7, (mode & 0o2000) !== 0, 's') +
    triplet(mode & 7, (mode & 0o1000) !== 0, 't')
  );
}

/**
 * Zip-slip: an entry name must be a relative path that stays inside the target after
 * normalisation. Backslashes are refused too, since some archivers write them as separators.
 */
export function safeZipEntry(name: string): string[] {
  if (name.includes('\0') || name.includes('\\')) throw invalidPath(`zip entry has a NUL or backslash: ${JSON.stringify(name)}`);
  if (name.startsWith('/') || /^[A-Za-z]:/.test(name)) throw invalidPath(`zip entry is absolute: ${JSON.stringify(name)}`);
  const parts = name.split('/').filter((part) => part !== '' && part !== '.');
  if (parts.includes('..')) throw invalidPath(`zip entry climbs out of the target with "..": ${JSON.stringify(name)}`);
  if (parts.length === 0) throw invalidPath(`zip entry has an empty name: ${JSON.stringify(name)}`);
  return parts;
}
