import { chown, mkdir, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { firstBlockedDir, type SystemUser } from '../../lib/system-user.js';

/**
 * Everything Chromium writes goes under one per-browser directory: the user-data dir,
 * and HOME and TMPDIR, so its SingletonSocket dirs and caches never pile up in /tmp and
 * one `rm -rf` removes all of it.
 */
export interface WorkDir {
  root: string;
  userData: string;
  home: string;
  tmp: string;
}

/**
 * Chromium puts its SingletonSocket under TMPDIR, and a Unix socket path has at most 107
 * bytes: past that Chromium aborts at start (SIGABRT, "Socket path too long").
 */
const MAX_SOCKET_PATH = 107;
const SINGLETON_SOCKET = '/org.chromium.Chromium.XXXXXX/SingletonSocket';

export function assertShortEnough(root: string): void {
  const longest = Buffer.byteLength(path.join(root, 'tmp') + SINGLETON_SOCKET);
  if (longest > MAX_SOCKET_PATH) {
    throw new Error(
      `work dir ${root} is too long by ${longest - MAX_SOCKET_PATH} bytes: Chromium's singleton socket ` +
        `under it would exceed the ${MAX_SOCKET_PATH}-byte Unix socket limit; use a shorter AGENT_WORK_DIR`,
    );
  }
}

export async function prepareWorkDir(requested: string | undefined, user: SystemUser | undefined): Promise<WorkDir> {
  let root: string;
  if (requested) {
    root = path.resolve(requested);
    assertShortEnough(root);
    // Parents we create must let the Chromium user pass through (search only).
    await mkdir(path.dirname(root), { recursive: true, mode: 0o711 });
    await mkdir(root, { recursive: true, mode: 0o700 });
  } else {
    root = await mkdtemp(path.join(os.tmpdir(), 'browserplane-browser-'));
    assertShortEnough(root);
  }
  const dirs: WorkDir = {
    root,
    userData: path.join(root, 'user-data'),
    home: path.join(root, 'home'),
    tmp: path.join(root, 'tmp'),
  };
  if (user) {
    const blocked = await firstBlockedDir(path.dirname(root), user);
    if (blocked) {
      await removeWorkDir(dirs);
      throw new Error(
        `Chromium runs as user "${user.name}", which cannot enter ${blocked}; ` +
          'choose a work dir outside it (AGENT_WORK_DIR, or the runtime\'s workRoot)',
      );
    }
  }
  // Side by side: this is on every launch's path, before Chromium can start.
  await Promise.all(
    [dirs.userData, dirs.home, dirs.tmp].map(async (dir) => {
      await mkdir(dir, { recursive: true, mode: 0o700 });
      if (user) await chown(dir, user.uid, user.gid);
    }),
  );
  if (user) await chown(root, user.uid, user.gid);
  return dirs;
}

export async function removeWorkDir(dirs: WorkDir): Promise<void> {
  await rm(dirs.root, { recursive: true, force: true, maxRetries: 3, retryDelay: 50 });
}
