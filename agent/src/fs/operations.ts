import { spawn } from 'node:child_process';
import { constants, type Stats } from 'node:fs';
import { lstat, open, readdir, readFile, rename, unlink, type FileHandle } from 'node:fs/promises';
import type { Readable } from 'node:stream';
import { canonicalPath, parseMode, symbolicMode, virtualComponents } from './confine.js';
import { escapeRefused, FsError, fromErrno, invalidPath } from './errors.js';
import type { Meter } from './quota.js';
import { DIR_FLAGS, DirHandle } from './dir-handle.js';
import { refuseHardLinked, type SessionRoot } from './session-root.js';
import { walkTree } from './walk.js';

/** Every operation of CONTRACT.md §2.2 except zip, multipart and watch, on a SessionRoot. */

const { O_WRONLY, O_CREAT, O_NOFOLLOW, O_NONBLOCK, O_RDONLY } = constants;
export const DEFAULT_FILE_MODE = 0o644;
export const DEFAULT_DIR_MODE = 0o755;

export interface FileInfo {
  name: string;
  path: string;
  is_dir: boolean;
  size_bytes: number;
  mode: string;
  mod_time: string;
}

export function fileInfoOf(virtualPath: string, info: Stats): FileInfo {
  const canonical = canonicalPath(virtualPath);
  return {
    name: canonical === '/' ? '/' : canonical.slice(canonical.lastIndexOf('/') + 1),
    path: canonical,
    is_dir: info.isDirectory(),
    size_bytes: info.isDirectory() ? 0 : info.size,
    mode: symbolicMode(info.mode),
    mod_time: info.mtime.toISOString(),
  };
}

/**
 * Writes `body` to `virtualPath`, creating missing parent directories. The final
 * component is opened with O_NOFOLLOW (a symlink there is refused) and without O_TRUNC,
 * so a file with other hard links is refused before a byte of it changes. Bytes are
 * counted against the quota as they arrive (`meter`: the request's own, else one for this
 * write); a write that fails part way, over the quota or not, removes the file, so no
 * partial file is left.
 */
export async function writeFile(root: SessionRoot, virtualPath: string, body: Readable | Buffer, modeText?: string, meter?: Meter): Promise<void> {
  const mode = parseMode(modeText, DEFAULT_FILE_MODE);
  const own = meter ?? (await root.quota.meter());
  try {
    await writeMetered(root, virtualPath, body, mode, own);
  } finally {
    if (!meter) own.close();
  }
}

async function writeMetered(root: SessionRoot, virtualPath: string, body: Readable | Buffer, mode: number, meter: Meter): Promise<void> {
  const { dir, name } = await root.openParent(virtualPath, { createMode: DEFAULT_DIR_MODE });
  try {
    const handle = await open(dir.child(name), O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK, mode).catch((error: unknown) => {
      throw fromErrno(error, virtualPath);
    });
    await root.verify(handle, virtualPath);
    await refuseHardLinked(handle, virtualPath);
    let written = 0;
    try {
      const info = await handle.stat();
      if (info.isDirectory()) throw fromErrno(Object.assign(new Error(), { code: 'EISDIR' }), virtualPath);
      await handle.truncate(0);
      meter.credit(info.size);
      const put = async (chunk: Buffer) => {
        meter.add(chunk.length);
        written += chunk.length;
        await handle.write(chunk);
      };
      if (Buffer.isBuffer(body)) await put(body);
      // destroyOnReturn false: leaving the loop on a refusal must not destroy the request
      // (and with it the socket, a reset racing the 413); the caller drains the rest.
      else for await (const chunk of body.iterator({ destroyOnReturn: false }) as AsyncIterable<Buffer>) await put(chunk);
      await handle.chmod(mode);
      await root.giveToBrowser(handle);
    } catch (error) {
      await removeIfSame(dir, name, handle);
      meter.drop(written);
      if (!Buffer.isBuffer(body)) body.resume();
      throw error;
    } finally {
      await handle.close();
    }
  } finally {
    await dir.close();
  }
}

/** Unlinks `name` if it is still the file `handle` has open (not something swapped in since). */
async function removeIfSame(dir: DirHandle, name: string, handle: FileHandle): Promise<void> {
  const [open_, named] = await Promise.all([handle.stat().catch(() => undefined), lstat(dir.child(name)).catch(() => undefined)]);
  if (open_ && named && open_.ino === named.ino && open_.dev === named.dev) await unlink(dir.child(name)).catch(() => undefined);
}

export async function fileInfo(root: SessionRoot, virtualPath: string): Promise<FileInfo> {
  const handle = await root.openExisting(virtualPath);
  try {
    return fileInfoOf(virtualPath, await handle.stat());
  } finally {
    await handle.close();
  }
}

/** An open regular file for streaming; directories are a 400. */
export async function openForRead(root: SessionRoot, virtualPath: string) {
  const handle = await root.openExisting(virtualPath);
  const info = await handle.stat();
  if (info.isDirectory()) {
    await handle.close();
    throw new FsError(400, 'is_a_directory', `${virtualPath} is a directory`);
  }
  return { handle, size: info.size };
}

/** Entries of a directory (symlinks reported as links, not followed), sorted by name. */
export async function listFiles(root: SessionRoot, virtualPath: string): Promise<FileInfo[]> {
  const dir = await root.openDir(virtualComponents(virtualPath));
  try {
    const base = canonicalPath(virtualPath);
    const names = (await readdir(dir.child(''))).sort();
    const infos: FileInfo[] = [];
    for (const name of names) {
      const info = await lstat(dir.child(name)).catch(() => undefined);
      if (info) infos.push(fileInfoOf(`${base === '/' ? '' : base}/${name}`, info));
    }
    return infos;
  } finally {
    await dir.close();
  }
}

export async function createDirectory(root: SessionRoot, virtualPath: string, modeText?: string): Promise<void> {
  const mode = parseMode(modeText, DEFAULT_DIR_MODE);
  const components = virtualComponents(virtualPath);
  root.checkDepth(components.length, virtualPath);
  // Directories take no bytes of the quota, but its walk refuses a tree already past the
  // entry limit, so directories cannot be made without end either.
  (await root.quota.meter()).close();
  const dir = await root.openDir(components, { createMode: mode });
  await dir.close();
}

/** Removes a file or a symlink (the link itself, never its target). */
export async function deleteFile(root: SessionRoot, virtualPath: string): Promise<void> {
  const { dir, name } = await root.openParent(virtualPath);
  try {
    const info = await lstat(dir.child(name)).catch((error: unknown) => {
      throw fromErrno(error, virtualPath);
    });
    if (info.isDirectory()) throw new FsError(400, 'is_a_directory', `${virtualPath} is a directory; use delete_directory`);
    await unlink(dir.child(name)).catch((error: unknown) => {
      throw fromErrno(error, virtualPath);
    });
  } finally {
    await dir.close();
  }
}

/**
 * Removes a directory tree. GNU rm walks it with openat and never follows symlinks, and
 * as root it runs as the browser's user, so even a race on the parent path can only
 * remove what the browser itself could.
 */
export async function deleteDirectory(root: SessionRoot, virtualPath: string): Promise<void> {
  const { dir, name } = await root.openParent(virtualPath);
  try {
    const info = await lstat(dir.child(name)).catch((error: unknown) => {
      throw fromErrno(error, virtualPath);
    });
    if (!info.isDirectory()) throw new FsError(400, 'not_a_directory', `${virtualPath} is not a directory`);
    await runRm(`${dir.hostPath}/${name}`, root);
  } finally {
    await dir.close();
  }
}

function runRm(hostPath: string, root: SessionRoot): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn('rm', ['-rf', '--one-file-system', '--', hostPath], {
      stdio: ['ignore', 'ignore', 'pipe'],
      ...(root.owner ? { uid: root.owner.uid, gid: root.owner.gid } : {}),
    });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.once('error', reject);
    child.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`rm exited ${code}: ${stderr.trim()}`))));
  });
}

/**
 * rename(2) between two open directories: neither final component is followed. A
 * directory moved deeper carries its subtree with it, so the subtree is walked first
 * (bounded: it may not pass the depth limit from its new place) and the move refused
 * with 400 path_too_deep, changing nothing, when it would. Without that, a move could
 * build a tree past the limit that every later quota walk trips over.
 */
export async function move(root: SessionRoot, srcPath: string, destPath: string): Promise<void> {
  const src = await root.openParent(srcPath);
  try {
    const dest = await root.openParent(destPath);
    try {
      const destDepth = virtualComponents(destPath).length;
      if (destDepth > virtualComponents(srcPath).length) await checkMovedDepth(root, src.dir, src.name, srcPath, destPath, destDepth);
      await rename(src.dir.child(src.name), dest.dir.child(dest.name)).catch((error: unknown) => {
        if ((error as NodeJS.ErrnoException).code === 'EINVAL') throw invalidPath(`cannot move ${srcPath} into itself`);
        throw fromErrno(error, (error as NodeJS.ErrnoException).code === 'ENOENT' ? srcPath : destPath);
      });
    } finally {
      await dest.dir.close();
    }
  } finally {
    await src.dir.close();
  }
}

/** 400 path_too_deep when the directory `name` in `dir`, moved to `destDepth`, would hold paths past the limit. */
async function checkMovedDepth(root: SessionRoot, dir: DirHandle, name: string, srcPath: string, destPath: string, destDepth: number): Promise<void> {
  const info = await lstat(dir.child(name)).catch((error: unknown) => {
    throw fromErrno(error, srcPath);
  });
  if (!info.isDirectory()) return;
  const handle = await open(dir.child(name), DIR_FLAGS).catch((error: unknown) => {
    throw fromErrno(error, srcPath);
  });
  const moved = new DirHandle(handle, await root.verify(handle, srcPath));
  try {
    await walkTree(root, moved, destDepth, () => undefined, {
      base: canonicalPath(destPath),
      tooDeep: (virtual) =>
        new FsError(400, 'path_too_deep', `moving ${srcPath} to ${destPath} would make ${virtual.slice(0, 200)} more than ${root.limits.maxDepth} levels below "/"`),
    });
  } finally {
    await moved.close();
  }
}

/**
 * chmod and optional chown of one file or directory, never through a symlink. Owner and
 * group may only be the session's own (the work dir's owner: Chromium's user), by number
 * or by that user's and group's names; any other is 400 owner_not_allowed. Names are
 * looked up for the session's own ids only, never for what the request names. setuid,
 * setgid and sticky bits are refused by parseMode (400 mode_not_allowed).
 */
export async function setFilePermissions(
  root: SessionRoot,
  input: { path: string; mode: string; owner?: string; group?: string },
): Promise<void> {
  const mode = parseMode(input.mode, DEFAULT_FILE_MODE);
  const self = root.identity();
  const uid = input.owner === undefined ? undefined : await ownId('/etc/passwd', input.owner, self.uid, 'owner');
  const gid = input.group === undefined ? undefined : await ownId('/etc/group', input.group, self.gid, 'group');
  const { dir, name } = await root.openParent(input.path);
  try {
    const handle = await open(dir.child(name), O_RDONLY | O_NOFOLLOW | O_NONBLOCK).catch((error: unknown) => {
      throw fromErrno(error, input.path);
    });
    try {
      await root.verify(handle, input.path);
      const info = await handle.stat();
      if (info.isFile() && info.nlink > 1) throw escapeRefused(input.path, `has ${info.nlink} hard links`);
      if (uid !== undefined || gid !== undefined) await handle.chown(uid ?? info.uid, gid ?? info.gid);
      await handle.chmod(mode);
    } finally {
      await handle.close().catch(() => undefined);
    }
  } finally {
    await dir.close();
  }
}

/**
 * `nameOrId` when it names the session's own id `own`: the number itself, or the name
 * the system database gives that id. Anything else is refused without looking it up.
 */
async function ownId(database: '/etc/passwd' | '/etc/group', nameOrId: string, own: number, field: 'owner' | 'group'): Promise<number> {
  const refuse = () => new FsError(400, 'owner_not_allowed', `${field} may only be the browser's own ${field === 'owner' ? 'user' : 'group'} (id ${own}): ${nameOrId.slice(0, 64)}`);
  if (/^\d+$/.test(nameOrId)) {
    if (Number(nameOrId) !== own) throw refuse();
    return own;
  }
  const lines = (await readFile(database, 'utf8')).split('\n');
  const ownName = lines.map((line) => line.split(':')).find((fields) => fields.length >= 3 && Number(fields[2]) === own && fields[2] !== '')?.[0];
  if (ownName === undefined || ownName !== nameOrId) throw refuse();
  return own;
}
