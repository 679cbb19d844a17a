import { lstat, mkdir, realpath, rm, stat, symlink } from 'node:fs/promises';
import path from 'node:path';
import { create, extract, type ReadEntry } from 'tar';

/**
 * A build's bundle: a tar.gz of the CONTENTS of apps/builds/<deployment id>/ (paths
 * relative, symlinks kept as links), made by the build pod and extracted by each run pod
 * to the same absolute path (a Python venv is not relocatable).
 *
 * Extraction refuses an archive with an entry outside the target (an absolute path, a
 * `..`, a hard link leading out) or of a kind a build does not make (devices, FIFOs): the
 * whole bundle fails, nothing is half trusted. Symlinks are made last, by this code, with
 * their targets as written (a venv's `bin/python -> /usr/bin/python3` is absolute, which
 * tar's own extraction would rewrite into a relative path); so no entry is ever written
 * through a link of the archive.
 */

export class BundleError extends Error {}

const KINDS = new Set(['File', 'OldFile', 'ContiguousFile', 'Directory', 'SymbolicLink', 'Link']);

export async function packBundle(buildDir: string, file: string): Promise<number> {
  await rm(file, { force: true });
  await create({ gzip: true, file, cwd: buildDir, portable: true, follow: false }, ['.']);
  return (await stat(file)).size;
}

/** Whether an archive path stays inside the target: relative, no `..` part. */
export function insideTarget(entryPath: string): boolean {
  if (entryPath.startsWith('/') || entryPath.includes('\\') || /^[a-zA-Z]:/.test(entryPath)) return false;
  return !entryPath.split('/').includes('..');
}

export async function extractBundle(file: string, target: string): Promise<void> {
  await rm(target, { recursive: true, force: true });
  await mkdir(target, { recursive: true, mode: 0o755 });
  const refused: string[] = [];
  const links: { at: string; to: string }[] = [];
  const errors: string[] = [];
  await extract({
    file,
    cwd: target,
    preserveOwner: false,
    filter: (entryPath: string, entry: unknown) => {
      const { type, linkpath } = entry as ReadEntry;
      if (!insideTarget(entryPath) || !KINDS.has(type) || (type === 'Link' && !insideTarget(String(linkpath ?? '')))) {
        refused.push(`${type} ${entryPath}`);
        return false;
      }
      if (type === 'SymbolicLink') {
        links.push({ at: entryPath, to: String(linkpath ?? '') });
        return false;
      }
      return true;
    },
    onwarn: (code: string, message: string | Error) => {
      if (code !== 'TAR_ENTRY_INFO') errors.push(`${code}: ${message instanceof Error ? message.message : message}`);
    },
  });
  if (refused.length > 0) throw new BundleError(`the bundle holds entries outside its directory or of a kind a build does not make: ${refused.slice(0, 5).join(', ')}`);
  if (errors.length > 0) throw new BundleError(`the bundle could not be extracted: ${errors.slice(0, 5).join('; ')}`);
  const root = await realpath(target);
  for (const link of links) await placeLink(root, link);
}

async function placeLink(root: string, link: { at: string; to: string }): Promise<void> {
  const at = path.join(root, link.at);
  const parent = await realpath(path.dirname(at)).catch(() => undefined);
  // Its dir must be a real dir of the tree (made by the extraction, never through a link).
  if (parent === undefined || !(parent === root || parent.startsWith(root + path.sep))) throw new BundleError(`the bundle's link ${link.at} lies outside its directory`);
  if (await lstat(at).then(() => true, () => false)) throw new BundleError(`the bundle's link ${link.at} collides with another entry`);
  await symlink(link.to, at);
}
