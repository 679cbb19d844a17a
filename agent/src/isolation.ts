import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { killProcessGroup } from '../../lib/process-group.js';
import type { SystemUser } from '../../lib/system-user.js';

/**
 * Embedded mode runs many browsers on one host, each for whoever holds its session, and
 * pages may open file:// URLs. As root, the agent therefore starts Chromium in a pid and
 * mount namespace of its own, as the session's own uid (the runtime gives each session
 * its own, see api/src/runtime/uid-pool.ts):
 *
 *   unshare --mount --pid --fork --mount-proc --propagation private
 *     sh -c SCRIPT       (root, pid 1 of the new namespace: the mounts below)
 *       setsid           (Chromium leads its own process group: pid == pgid, as unwrapped)
 *         setpriv --reuid U --regid G --clear-groups --no-new-privs
 *           chromium ...  (still pid 1 of the namespace; every step execs the next)
 *
 * The script mounts a tmpfs over the parent of the work dir (the runtime's directory of
 * all browsers) and over the host's world-writable dirs (/tmp, /var/tmp, /run/lock), and
 * binds only this browser's dir (and the X11 socket dir) back, so other sessions' dirs
 * are not even visible and nothing written there outlives the browser; binds extra dirs (chrome_policy's managed policy dir); and gives the
 * browser a /dev/shm of its own. /proc is the namespace's: it lists the browser's own
 * processes only. Everything lives as long as the namespace, i.e. until Chromium's last
 * process exits, and nothing propagates back to the host.
 *
 * The spawned pid is unshare's (root, waiting for Chromium); Chromium is its only child,
 * and innerPid finds it. unshare exits with Chromium's exit code or re-raises the signal
 * that killed it, except SIGKILL, which it cannot re-raise (util-linux 2.38: exit code 1
 * and "sigprocmask unblock failed"): wrappedExit reads that back as SIGKILL.
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
const SHARED_TMP_SIZE = '64m';

// The work dir (fd 9) and the X11 socket dir (fd 8) are opened before the tmpfs hides
// them and bound back from /proc/self/fd: mount must not canonicalize that path, or it
// binds the new empty directory onto itself. fds 3 and 4 (a DevTools pipe) pass through.
const SCRIPT = `set -e
hide=$1 work=$2
shift 2
exec 9<"$work"
keepx=
if [ -d "${X11_SOCKET_DIR}" ]; then keepx=1; exec 8<"${X11_SOCKET_DIR}"; fi
mount -t tmpfs -o mode=0711,size=1m,nosuid,nodev,noexec browserplane-hidden "$hide"
for dir in ${SHARED_TMP_DIRS.join(' ')}; do
  if [ -d "$dir" ]; then mount -t tmpfs -o mode=1777,size=${SHARED_TMP_SIZE},nosuid,nodev browserplane-tmp "$dir"; fi
done
mkdir -p "$work"
mount --no-canonicalize --bind /proc/self/fd/9 "$work"
if [ -n "$keepx" ]; then mkdir -p "${X11_SOCKET_DIR}"; mount --no-canonicalize --bind /proc/self/fd/8 "${X11_SOCKET_DIR}"; exec 8<&-; fi
exec 9<&-
while [ "$1" != "--" ]; do mount --bind "$1" "$2"; shift 2; done
shift
mount -t tmpfs -o mode=1777,nosuid,nodev browserplane-shm /dev/shm
exec "$@"`;

/** The wrapper for chromium.ts (LaunchOptions.wrap); only for an agent running as root. */
export function isolationWrap(options: { user: SystemUser | undefined; workDir: string; binds: BindMount[] }): (executable: string, args: string[]) => { command: string; args: string[] } {
  const { user, workDir, binds } = options;
  const hide = path.dirname(workDir);
  if (hide === '/') throw new Error(`work dir ${workDir} is directly under /: its parent cannot be hidden from the browser`);
  const drop = user ? ['setpriv', `--reuid=${user.uid}`, `--regid=${user.gid}`, '--clear-groups', '--no-new-privs', '--'] : [];
  return (executable, args) => {
    const hidden = [hide, ...SHARED_TMP_DIRS].find((dir) => path.resolve(executable).startsWith(`${dir}/`));
    if (hidden) throw new Error(`Chromium (${executable}) lies under ${hidden}, which the browser's mount namespace hides; install it elsewhere`);
    return {
      command: 'unshare',
      args: [
        '--mount',
        '--pid',
        '--fork',
        '--mount-proc',
        '--propagation',
        'private',
        '--',
        '/bin/sh',
        '-c',
        SCRIPT,
        'browserplane-isolation',
        hide,
        workDir,
        ...binds.flatMap((bind) => [bind.source, bind.target]),
        '--',
        'setsid',
        ...drop,
        executable,
        ...args,
      ],
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

/** Chromium's exit as the wrapper reports it: see the note on SIGKILL above. */
export function wrappedExit(code: number | null, signal: NodeJS.Signals | null, stderrTail: string): { code: number | null; signal: NodeJS.Signals | null } {
  if (code === 1 && signal === null && /unshare: sigprocmask unblock failed/.test(stderrTail)) return { code: null, signal: 'SIGKILL' };
  return { code, signal };
}
