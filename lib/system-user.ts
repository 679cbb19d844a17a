import { execFile } from 'node:child_process';
import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';

/**
 * Unprivileged system users for the programs we start as root: Chromium refuses its
 * sandbox as root and Postgres refuses to run at all. The agent runs Chromium as one,
 * the service runs its embedded Postgres as another (api/src/db/postgres-user.ts). It
 * lives with the agent because the agent must not load service code at runtime (it is a
 * pod's container later); the service may import this pure module.
 */

const run = promisify(execFile);

export interface SystemUser {
  uid: number;
  gid: number;
  name: string;
}

/** The user `name`, created when missing; undefined when we are not root (the program then runs as us). */
export async function resolveSystemUser(name: string): Promise<SystemUser | undefined> {
  if (process.getuid?.() !== 0) return undefined;
  const lookup = async (): Promise<SystemUser> => {
    const local = await fromPasswdFile(name);
    if (local) return local;
    // Users from other NSS sources (LDAP, sssd): two execs, about 20 ms each.
    const { stdout: uid } = await run('id', ['-u', name]);
    const { stdout: gid } = await run('id', ['-g', name]);
    return { uid: Number(uid.trim()), gid: Number(gid.trim()), name };
  };
  try {
    return await lookup();
  } catch {
    try {
      await run('useradd', ['--system', '--user-group', '--no-create-home', '--shell', '/usr/sbin/nologin', name]);
    } catch (error) {
      // Two agents starting at once both try to create the user; the loser finds it.
      return lookup().catch(() => {
        throw error;
      });
    }
    return lookup();
  }
}

/** useradd writes /etc/passwd; reading it costs nothing on the launch path, unlike `id`. */
async function fromPasswdFile(name: string): Promise<SystemUser | undefined> {
  const passwd = await readFile('/etc/passwd', 'utf8').catch(() => '');
  const fields = passwd.split('\n').find((line) => line.startsWith(`${name}:`))?.split(':');
  if (!fields || fields.length < 4) return undefined;
  return { uid: Number(fields[2]), gid: Number(fields[3]), name };
}

/** The first directory from `dir` up to / that `user` may not enter, if any. */
export async function firstBlockedDir(dir: string, user: SystemUser): Promise<string | undefined> {
  for (let current = dir; ; current = path.dirname(current)) {
    const info = await stat(current);
    const bit = info.uid === user.uid ? 0o100 : info.gid === user.gid ? 0o010 : 0o001;
    if ((info.mode & bit) === 0) return current;
    if (path.dirname(current) === current) return undefined;
  }
}
