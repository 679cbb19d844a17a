import { constants } from 'node:fs';
import { lstat, mkdir, open, readFile, readlink, realpath, stat, type FileHandle } from 'node:fs/promises';
import path from 'node:path';
import type { FsLimits } from '../config.js';
import { isInside, virtualComponents } from './confine.js';
import { escapeRefused, FsError, fromErrno, invalidPath } from './errors.js';
import { DIR_FLAGS, DirHandle, type Owner, type TreeRoot } from './dir-handle.js';
import { Quota } from './quota.js';

/**
 * The browser's filesystem: Chromium's HOME (<work dir>/home) seen as "/". It holds
 * /Downloads, Chromium's default download directory (xdg fallback $HOME/Downloads), so
 * no preference or CDP call is needed to make downloads land where the API can read them.
 *
 * Node has no openat(2), so every lookup is done one component at a time on directory
 * file descriptors, through /proc/self/fd/<fd>/<name>: the kernel resolves that from the
 * already-open directory, so swapping a parent for a symlink after the check changes
 * nothing. Every descriptor opened is checked against the root through its
 * /proc/self/fd link before anything is read or written through it.
 */

const { O_RDONLY, O_NOFOLLOW, O_NONBLOCK } = constants;

export class SessionRoot implements TreeRoot {
  readonly quota: Quota;

  constructor(
    /** Real path (no symlinks) of the root on the host. */
    readonly hostRoot: string,
    /** Who Chromium runs as; files the agent creates are given to it (undefined: not root). */
    readonly owner: Owner | undefined,
    readonly limits: FsLimits,
  ) {
    this.quota = new Quota(this);
  }

  /**
   * The session's own user and group: the work dir's owner (Chromium's user) when the
   * agent runs as root, else the agent's own. The only owner set_file_permissions allows.
   */
  identity(): Owner {
    return this.owner ?? { uid: process.getuid?.() ?? -1, gid: process.getgid?.() ?? -1 };
  }

  /** 400 path_too_deep for a path with more components below "/" than the limit. */
  checkDepth(depth: number, virtualPath: string): void {
    if (depth > this.limits.maxDepth) {
      throw new FsError(400, 'path_too_deep', `${virtualPath.slice(0, 200)}: more than ${this.limits.maxDepth} levels below "/"`);
    }
  }

  /** The root of the browser whose Chromium runs as `chromiumPid`, from its --user-data-dir. */
  static async ofChromium(chromiumPid: number, limits: FsLimits): Promise<SessionRoot> {
    const args = (await readFile(`/proc/${chromiumPid}/cmdline`, 'utf8')).split('\0');
    const userData = args.find((arg) => arg.startsWith('--user-data-dir='))?.slice('--user-data-dir='.length);
    if (!userData) throw new Error(`chromium ${chromiumPid} has no --user-data-dir`);
    const workDir = path.dirname(userData);
    const home = path.join(workDir, 'home');
    const info = await stat(workDir);
    const owner = process.getuid?.() === 0 ? { uid: info.uid, gid: info.gid } : undefined;
    const root = new SessionRoot(await realpath(home), owner, limits);
    const downloads = await root.openDir(['Downloads'], { createMode: 0o755 });
    await downloads.close();
    return root;
  }

  /** The real path behind an open descriptor, refused unless it lies under the root. */
  async verify(handle: FileHandle, virtualPath: string): Promise<string> {
    const real = await readlink(`/proc/self/fd/${handle.fd}`);
    if (!isInside(this.hostRoot, real)) {
      await handle.close();
      throw escapeRefused(virtualPath, 'resolves outside the browser filesystem');
    }
    return real;
  }

  async giveToBrowser(handle: FileHandle): Promise<void> {
    if (this.owner) await handle.chown(this.owner.uid, this.owner.gid);
  }

  /**
   * Opens the directory at `components`, one component at a time. Symlinks are followed
   * only when their target (absolute or relative) stays under the root; missing
   * directories are created with `createMode` when given.
   */
  async openDir(components: string[], options: { createMode?: number } = {}): Promise<DirHandle> {
    this.checkDepth(components.length, `/${components.join('/')}`);
    const rootHandle = await open(this.hostRoot, DIR_FLAGS);
    let dir = new DirHandle(rootHandle, await this.verify(rootHandle, '/'));
    const walked: string[] = [];
    try {
      for (const name of components) {
        walked.push(name);
        const next = await this.openChildDir(dir, name, `/${walked.join('/')}`, options.createMode);
        await dir.close();
        dir = next;
      }
      return dir;
    } catch (error) {
      await dir.close().catch(() => undefined);
      throw error;
    }
  }

  private async openChildDir(dir: DirHandle, name: string, virtualPath: string, createMode: number | undefined): Promise<DirHandle> {
    try {
      const handle = await open(dir.child(name), DIR_FLAGS);
      return new DirHandle(handle, await this.verify(handle, virtualPath));
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'ELOOP' || code === 'ENOTDIR') return this.followLink(dir, name, virtualPath, error);
      if (code !== 'ENOENT' || createMode === undefined) throw fromErrno(error, virtualPath);
    }
    await mkdir(dir.child(name), { mode: createMode }).catch((error: NodeJS.ErrnoException) => {
      if (error.code !== 'EEXIST') throw fromErrno(error, virtualPath);
    });
    const handle = await open(dir.child(name), DIR_FLAGS).catch((error: unknown) => {
      throw fromErrno(error, virtualPath);
    });
    const created = new DirHandle(handle, await this.verify(handle, virtualPath));
    await handle.chmod(createMode);
    await this.giveToBrowser(handle);
    return created;
  }

  /** A symlink component: followed only when it lands under the root. */
  private async followLink(dir: DirHandle, name: string, virtualPath: string, original: unknown): Promise<DirHandle> {
    const info = await lstat(dir.child(name)).catch((error: unknown) => {
      throw fromErrno(error, virtualPath);
    });
    if (!info.isSymbolicLink()) throw fromErrno(original, virtualPath);
    const target = await this.resolveLink(dir, name, virtualPath);
    const handle = await open(target, DIR_FLAGS).catch((error: unknown) => {
      throw fromErrno(error, virtualPath);
    });
    return new DirHandle(handle, await this.verify(handle, virtualPath));
  }

  /** realpath of a symlink, refused when it (or any link it chains to) leaves the root. */
  async resolveLink(dir: DirHandle, name: string, virtualPath: string): Promise<string> {
    const target = await realpath(dir.child(name)).catch((error: unknown) => {
      throw fromErrno(error, virtualPath);
    });
    if (!isInside(this.hostRoot, target)) throw escapeRefused(virtualPath, 'is a symbolic link that points outside the browser filesystem');
    return target;
  }

  /** The open parent directory of `virtualPath` and the last component's name. */
  async openParent(virtualPath: string, options: { createMode?: number } = {}): Promise<{ dir: DirHandle; name: string }> {
    const parts = virtualComponents(virtualPath);
    const name = parts.pop();
    if (name === undefined) throw invalidPath('this operation needs a path below "/"');
    this.checkDepth(parts.length + 1, virtualPath);
    return { dir: await this.openDir(parts, options), name };
  }

  /**
   * Opens an existing file or directory for reading. A final symlink is followed only
   * when it stays under the root; a regular file with other hard links is refused, since
   * another link may live outside the root.
   */
  async openExisting(virtualPath: string): Promise<FileHandle> {
    const parts = virtualComponents(virtualPath);
    if (parts.length === 0) {
      const handle = await open(this.hostRoot, DIR_FLAGS);
      await this.verify(handle, virtualPath);
      return handle;
    }
    const { dir, name } = await this.openParent(virtualPath);
    try {
      let handle: FileHandle;
      try {
        handle = await open(dir.child(name), O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'ELOOP') throw fromErrno(error, virtualPath);
        handle = await open(await this.resolveLink(dir, name, virtualPath), O_RDONLY | O_NONBLOCK).catch((failure: unknown) => {
          throw fromErrno(failure, virtualPath);
        });
      }
      await this.verify(handle, virtualPath);
      await refuseHardLinked(handle, virtualPath);
      return handle;
    } finally {
      await dir.close();
    }
  }
}

export async function refuseHardLinked(handle: FileHandle, virtualPath: string): Promise<void> {
  const info = await handle.stat();
  if (info.isFile() && info.nlink > 1) {
    await handle.close();
    throw escapeRefused(virtualPath, `has ${info.nlink} hard links; a file linked from elsewhere is not served`);
  }
  if (!info.isFile() && !info.isDirectory()) {
    await handle.close();
    throw new FsError(400, 'invalid_path', `${virtualPath} is not a regular file or directory`);
  }
}
