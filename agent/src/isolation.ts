import { existsSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import { constants } from 'node:os';
import path from 'node:path';
import { killProcessGroup } from '../../lib/process-group.js';
import type { SystemUser } from '../../lib/system-user.js';

/**
 * Embedded mode runs many browsers on one host, each for whoever holds its session, and
 * pages may open file:// URLs. As root, the agent therefore starts Chromium in a pid and
 * mount namespace of its own, as the session's own uid (the runtime gives each session
 * its own, see api/src/runtime/uid-pool.ts):
 *
 *   setpriv --reuid U --regid G --clear-groups --no-new-privs
 *     bwrap --unshare-user --unshare-pid --as-pid-1 --new-session ...
 *       chromium ...  (pid 1 of the new pid namespace, leader of its own session and group)
 *
 * setpriv drops root before anything else, so bubblewrap (the same tool, as the same kind
 * of user, that sandboxes the session's processes: process/sandbox.ts) sets the namespaces
 * up as the session's uid, in a user namespace that maps that uid to itself: files stay
 * the session's on the host, and every path bwrap opens is opened with the session's own
 * permissions, so nothing the browser can plant (a symlink) points it anywhere the session
 * could not reach anyway. In that new mount namespace a tmpfs covers the parent of the
 * work dir (the runtime's directory of all browsers) and the host's world-writable dirs
 * (/tmp, /var/tmp, /run/lock), and only this browser's dir (and the X11 socket dir) are
 * bound back, so other sessions' dirs are not even visible and nothing written there
 * outlives the browser; extra dirs (chrome_policy's managed policy dir) are bound; the
 * browser gets a /dev/shm of its own, and /proc is the new pid namespace's: it lists the
 * browser's own processes only. Everything lives as long as the namespace, i.e. until
 * Chromium's last process exits, and nothing propagates back to the host. Chromium's own
 * sandbox still works inside (its renderers nest their namespaces and run at Seccomp 2).
 *
 * It replaces `unshare` running a shell script of `mount` commands: one exec of a program
 * that makes the mounts with system calls instead of ten processes, 15-20 ms less on every
 * launch on an idle 2-core host and far more on a busy one (issue 20).
 *
 * The spawned pid is bwrap's (outside the namespaces, waiting for Chromium); Chromium is
 * its only child, and innerPid finds it. bwrap exits with Chromium's exit code, or with
 * 128 + the signal that killed it: wrappedExit reads that back as the signal. Chromium
 * exits when the agent dies because its DevTools pipe closes, as unwrapped (no
 * --die-with-parent: a service restart finds and ends what is left, local-browser.ts).
 *
 * A non-root agent (a browser pod) starts Chromium as itself with no wrapper: there the
 * pod is the boundary.
 */

export interface BindMount {
  source: string;
  target: string;
}

const X11_SOCKET_DIR = '/tmp/.X11-unix';
/**
 * The host's world-writable directories: each browser gets empty ones of its own, so
 * nothing it leaves there outlives it (a later session may get the same uid) and nothing
 * of the host's (another program's files, a log) is there to read. Chromium's own temp
 * files go to TMPDIR in its work dir; these only take what a page or client puts there.
 */
const SHARED_TMP_DIRS = ['/tmp', '/var/tmp', '/run/lock'];
const SHARED_TMP_BYTES = 64 * 1024 * 1024;
const HIDE_BYTES = 1024 * 1024;

/** The wrapper for chromium.ts (LaunchOptions.wrap); only for an agent running as root. */
export function isolationWrap(options: { user: SystemUser | undefined; workDir: string; binds: BindMount[] }): (executable: string, args: string[]) => { command: string; args: string[] } {
  const { user, workDir, binds } = options;
  const hide = path.dirname(workDir);
  if (hide === '/') throw new Error(`work dir ${workDir} is directly under /: its parent cannot be hidden from the browser`);
  const drop = user ? ['setpriv', `--reuid=${user.uid}`, `--regid=${user.gid}`, '--clear-groups', '--no-new-privs', '--'] : [];
  const keepX11 = existsSync(X11_SOCKET_DIR);
  const mounts = [
    // bwrap resolves every source in the host's tree, so a dir it has hidden is still bound from there.
    ...['--dev-bind', '/', '/'],
    // In this order: the work root may lie under one of the shared dirs (a data dir in /tmp),
    // and bwrap makes the mount points of what follows in the tmpfs before it.
    ...SHARED_TMP_DIRS.filter((dir) => existsSync(dir)).flatMap((dir) => ['--perms', '01777', '--size', String(SHARED_TMP_BYTES), '--tmpfs', dir]),
    ...['--perms', '0711', '--size', String(HIDE_BYTES), '--tmpfs', hide],
    ...['--bind', workDir, workDir],
    ...(keepX11 ? ['--bind', X11_SOCKET_DIR, X11_SOCKET_DIR] : []),
    ...binds.flatMap((bind) => ['--bind', bind.source, bind.target]),
    ...['--perms', '01777', '--tmpfs', '/dev/shm'],
    ...['--proc', '/proc'],
  ];
  return (executable, args) => {
    const hidden = [hide, ...SHARED_TMP_DIRS].find((dir) => path.resolve(executable).startsWith(`${dir}/`));
    if (hidden) throw new Error(`Chromium (${executable}) lies under ${hidden}, which the browser's mount namespace hides; install it elsewhere`);
    return {
      command: drop.length > 0 ? drop[0]! : 'bwrap',
      args: [...drop.slice(1), ...(drop.length > 0 ? ['bwrap'] : []), '--unshare-user', '--unshare-pid', '--as-pid-1', '--new-session', ...mounts, '--', executable, ...args],
    };
  };
}

/** Chromium's pid (pid 1 of the namespace, seen from ours): the wrapper's only child. */
export async function innerPid(wrapperPid: number): Promise<number | undefined> {
  const children = await readFile(`/proc/${wrapperPid}/task/${wrapperPid}/children`, 'utf8').catch(() => undefined);
  if (children !== undefined) {
    const first = Number(children.trim().split(/\s+/)[0]);
    return Number.isInteger(first) && first > 0 ? first : undefined;
  }
  // Kernels without CONFIG_PROC_CHILDREN: the process whose parent is the wrapper.
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = await readFile(`/proc/${entry}/stat`, 'utf8').catch(() => '');
    if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === wrapperPid) return Number(entry);
  }
  return undefined;
}

/** Kills a wrapped launch: Chromium's group (its death ends the namespace), then the wrapper's. */
export async function killWrapped(wrapperPid: number): Promise<void> {
  const inner = await innerPid(wrapperPid);
  if (inner) await killProcessGroup(inner);
  await killProcessGroup(wrapperPid);
}

/** Chromium's exit as the wrapper reports it: bwrap exits 128 + n when Chromium was killed by signal n. */
export function wrappedExit(code: number | null, signal: NodeJS.Signals | null): { code: number | null; signal: NodeJS.Signals | null } {
  if (code !== null && code > 128 && signal === null) {
    const name = Object.entries(constants.signals).find(([, number]) => number === code - 128)?.[0];
    if (name) return { code: null, signal: name as NodeJS.Signals };
  }
  return { code, signal };
}
