import { spawn } from 'node:child_process';
import { lstat } from 'node:fs/promises';
import path from 'node:path';
import type { XDisplay } from '../display.js';
import { ProcessError } from './errors.js';

/**
 * How a session's process is started: inside bubblewrap, as the session's own user, in
 * user, pid, ipc and uts namespaces of its own, with the session's files (<work dir>/home,
 * the fs API's "/") as its "/" and the system read-only on top. bwrap itself runs as
 * that user (setpriv drops the agent's root first, groups cleared, no_new_privs): every
 * mount point bwrap creates and every file it opens is then subject to the user's own
 * permissions, so a symlink the session planted in its root can at worst point bwrap at
 * something the session could reach anyway. bwrap run as root would follow those links
 * as root. This needs unprivileged user namespaces, checked once per agent (probe()).
 *
 * Without them: as root (embedded mode) the agent refuses to run processes at all, since
 * nothing short of the sandbox keeps a process off the host; as non-root (a browser pod,
 * whose container is the boundary) the process runs as the agent's user with its cwd in
 * the session's home (docs/processes.md, "Runtimes").
 */

/** Read-only pieces of the host's /etc a process needs for users, names, TLS, fonts, time and the loader. */
const ETC_FILES = [
  'passwd',
  'group',
  'hosts',
  'host.conf',
  'resolv.conf',
  'nsswitch.conf',
  'gai.conf',
  'ssl',
  'ca-certificates',
  'ca-certificates.conf',
  'alternatives',
  'fonts',
  'ld.so.cache',
  'ld.so.conf',
  'ld.so.conf.d',
  'localtime',
  'timezone',
  'mime.types',
  'os-release',
];
/** Merged /usr: the host's /bin etc. are links into /usr, bound here as directories (bwrap 0.8 refuses an existing --symlink). */
const USR_LINKS = ['bin', 'lib', 'lib64', 'sbin'];
/** /etc and /run hold mount points and the X cookie only. */
const SMALL_TMPFS_BYTES = 1024 * 1024;
/** Where a headful session's X cookie is inside: a fixed path, whatever file the display keeps it in. */
export const XAUTHORITY_INSIDE = '/run/browserplane/Xauthority';
/** Directories bwrap mounts on inside the session's root, so it creates them there (docs/processes.md). */
export const MOUNT_POINTS = ['usr', ...USR_LINKS, 'etc', 'dev', 'proc', 'tmp', 'run'];

export interface Identity {
  uid: number;
  gid: number;
}

export type SandboxMode = 'bwrap' | 'unconfined';

export interface LaunchPlan {
  command: string;
  args: string[];
  env: Record<string, string>;
  /** Host directory the launcher starts in. */
  cwd: string;
}

export interface LaunchRequest {
  command: string;
  args: string[];
  env: Record<string, string>;
  /** Inside the session's "/" (already checked to be a directory there). */
  cwd: string;
  tty: boolean;
  /** Host paths bound read-only at targets under /run/browserplane (a tmpfs: nothing is created in the session's files). */
  readOnly?: { source: string; target: string }[];
}

const BASE_ENV = { PATH: '/usr/local/bin:/usr/bin:/bin', LANG: 'C.UTF-8' };

export class Sandbox {
  constructor(
    readonly mode: SandboxMode,
    /** Real path of the session's root on the host. */
    private readonly hostRoot: string,
    private readonly user: Identity,
    private readonly display: XDisplay | undefined,
    /** RLIMIT_NPROC: a fork bomb stops there (the count is the uid's, Chromium's processes included). */
    private readonly maxTasks = 512,
  ) {}

  /** `bwrap` when the kernel allows it; else `unconfined` for a non-root agent, and 409 sandbox_unavailable for root. */
  static async create(hostRoot: string, user: Identity, display: XDisplay | undefined, maxTasks: number): Promise<Sandbox> {
    if (await probe(user)) return new Sandbox('bwrap', hostRoot, user, display, maxTasks);
    if (process.getuid?.() === 0) return new Sandbox('unconfined', hostRoot, user, display, maxTasks).refuse();
    return new Sandbox('unconfined', hostRoot, user, display, maxTasks);
  }

  private refuse(): never {
    throw new ProcessError(
      409,
      'sandbox_unavailable',
      'processes need bubblewrap with unprivileged user namespaces on this host (kernel.unprivileged_userns_clone / user.max_user_namespaces), which it refuses; the agent runs as root and will not run them unconfined',
    );
  }

  plan(request: LaunchRequest): LaunchPlan {
    const env = { ...BASE_ENV, HOME: '/', ...(request.tty ? { TERM: 'xterm-256color' } : {}), ...this.displayEnv(), ...request.env };
    const limit = ['prlimit', `--nproc=${this.maxTasks}:${this.maxTasks}`, '--'];
    if (this.mode === 'unconfined') {
      // No RLIMIT_NPROC here: it counts every task of the uid on the node, and every
      // browser pod (and the API's) runs as the same uid, so a limit sized for one session
      // would fail the forks of all. The pod's own PID limit bounds it instead.
      const cwd = path.join(this.hostRoot, request.cwd);
      return { command: request.command, args: request.args, env: { ...env, HOME: this.hostRoot }, cwd };
    }
    const bwrap = ['bwrap', ...this.bwrapArgs(request), ...Object.entries(env).flatMap(([name, value]) => ['--setenv', name, value])];
    bwrap.push('--chdir', request.cwd, '--', request.command, ...request.args);
    const drop = process.getuid?.() === 0 ? ['setpriv', `--reuid=${this.user.uid}`, `--regid=${this.user.gid}`, '--clear-groups', '--no-new-privs', '--'] : [];
    const [command, ...args] = [...drop, ...limit, ...bwrap];
    // The launcher's own environment is empty: the caller's variables reach only the process (--setenv).
    return { command: command!, args, env: {}, cwd: '/' };
  }

  /**
   * Refuses a root whose mount points were replaced by something else than a directory:
   * bwrap would mount through a symlink (as the session's user: a nuisance, not an escape).
   */
  async checkMountPoints(): Promise<void> {
    if (this.mode !== 'bwrap') return;
    for (const name of MOUNT_POINTS) {
      const info = await lstat(path.join(this.hostRoot, name)).catch(() => undefined);
      if (info && !info.isDirectory()) {
        throw new ProcessError(409, 'mount_point_taken', `/${name} in the browser filesystem is not a directory; processes mount the system there: remove it`);
      }
    }
  }

  private bwrapArgs(request: LaunchRequest): string[] {
    const args = ['--unshare-user', '--unshare-pid', '--unshare-ipc', '--unshare-uts', '--unshare-cgroup-try', '--die-with-parent'];
    // Without a terminal, a session of its own: no TIOCSTI into a terminal it inherited.
    if (!request.tty) args.push('--new-session');
    args.push('--hostname', 'browser', '--bind', this.hostRoot, '/', '--ro-bind', '/usr', '/usr');
    for (const link of USR_LINKS) args.push('--ro-bind-try', `/${link}`, `/${link}`);
    // tmpfs over /etc and /run: the session's root keeps empty directories only, never host
    // files. Sized, since a tmpfs is memory: unsized, one may take half the host's.
    args.push('--size', String(SMALL_TMPFS_BYTES), '--tmpfs', '/etc');
    for (const name of ETC_FILES) args.push('--ro-bind-try', `/etc/${name}`, `/etc/${name}`);
    args.push('--dev', '/dev', '--proc', '/proc', '--size', String(SMALL_TMPFS_BYTES), '--tmpfs', '/run');
    // /tmp is the session's own /tmp, the one the fs API names: a file put there with
    // fs.writeFile is `cat /tmp/...` here, and the reverse (made if missing, as the user).
    args.push('--dir', '/tmp');
    // The display's socket is reached through its abstract name (@/tmp/.X11-unix/X<n>, in
    // the network namespace processes share with the host), so no socket file is bound
    // into the session's /tmp; the cookie is what keeps other displays out.
    if (this.display) args.push('--ro-bind', this.display.xauthority, XAUTHORITY_INSIDE);
    for (const bind of request.readOnly ?? []) {
      if (!bind.target.startsWith('/run/browserplane/')) throw new Error(`read-only binds go under /run/browserplane, not ${bind.target}`);
      args.push('--ro-bind', bind.source, bind.target);
    }
    return args;
  }

  private displayEnv(): Record<string, string> {
    if (!this.display) return {};
    return { DISPLAY: this.display.name, XAUTHORITY: this.mode === 'bwrap' ? XAUTHORITY_INSIDE : this.display.xauthority };
  }
}

let probed: Promise<boolean> | undefined;

/** Whether bwrap can make its namespaces as the session's user here: asked once per agent. */
function probe(user: Identity): Promise<boolean> {
  probed ??= new Promise<boolean>((resolve) => {
    const drop = process.getuid?.() === 0 ? ['setpriv', `--reuid=${user.uid}`, `--regid=${user.gid}`, '--clear-groups', '--no-new-privs', '--'] : [];
    const argv = [...drop, 'bwrap', '--unshare-user', '--unshare-pid', '--ro-bind', '/', '/', '--proc', '/proc', '--', '/usr/bin/true'];
    const child = spawn(argv[0]!, argv.slice(1), { stdio: 'ignore', env: {} });
    child.once('error', () => resolve(false));
    child.once('exit', (code) => resolve(code === 0));
  });
  return probed;
}
