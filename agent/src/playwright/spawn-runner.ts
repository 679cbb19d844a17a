import { spawn, type ChildProcess } from 'node:child_process';

/**
 * How a Playwright runner is started, in one place so that it can move onto the session's
 * process sandbox (agent/src/process) without the rest of playwright/ changing.
 *
 * As root (embedded mode), the runner is confined like this:
 *
 *   setpriv --pdeathsig KILL          (dies with the agent, whatever becomes of it)
 *     unshare --pid --fork --kill-child --mount-proc
 *       setpriv --reuid U --regid G --clear-groups --no-new-privs --pdeathsig KILL
 *         node runner.js              (pid 1 of a pid namespace of its own)
 *
 * so the code runs as the session's unprivileged uid (the owner of the browser's files)
 * with no supplementary groups and no way to gain privileges (setuid binaries do not
 * elevate), sees only its own processes in /proc and can signal nothing else: not the
 * agent, not Chromium, not another session. File permissions keep it out of the service's
 * data dir and other sessions' work dirs (0700, other owners). When pid 1 of the
 * namespace dies, the kernel kills everything else in it, so whatever the code started
 * ends with it.
 *
 * Not done here, for the sandbox to do: a network namespace (the runner's own requests
 * bypass the browser's proxy forwarder and its private-network block) and private /tmp,
 * /var/tmp and /dev/shm (what the code leaves there outlives the session).
 *
 * Not as root (a browser pod), the runner runs as the agent's own user, with no new
 * privileges: there the pod is the boundary, as it is for Chromium.
 *
 * Either way the runner leads a process group of its own (detached), which killRunner
 * kills as a whole.
 */

export interface RunnerSpawn {
  command: string;
  args: string[];
  /** The whole environment: nothing of the agent's (its token above all) is inherited. */
  env: Record<string, string>;
  cwd: string;
  /** The session's user; ignored unless the agent runs as root. */
  uid?: number;
  gid?: number;
}

/** stdin, stdout, stderr, and fd 3 for the runner's reports (protocol.ts). */
export type RunnerProcess = ChildProcess & { pid: number };

export function spawnRunner(spec: RunnerSpawn): RunnerProcess {
  const asRoot = process.getuid?.() === 0;
  const confined =
    asRoot && spec.uid !== undefined && spec.gid !== undefined
      ? [
          'unshare',
          '--pid',
          '--fork',
          '--kill-child',
          '--mount-proc',
          '--',
          'setpriv',
          `--reuid=${spec.uid}`,
          `--regid=${spec.gid}`,
          '--clear-groups',
          '--no-new-privs',
          '--pdeathsig=KILL',
          '--',
        ]
      : ['setpriv', '--no-new-privs', '--'];
  if (asRoot && confined[0] !== 'unshare') throw new Error('refusing to run Playwright code as root: the session has no user of its own');
  const child = spawn('setpriv', ['--pdeathsig=KILL', '--', ...confined, spec.command, ...spec.args], {
    env: spec.env,
    cwd: spec.cwd,
    detached: true,
    stdio: ['pipe', 'pipe', 'pipe', 'pipe'],
  });
  if (child.pid === undefined) {
    // spawn reports ENOENT and the like asynchronously; the caller sees it as an exit.
    return Object.assign(child, { pid: -1 });
  }
  return child as RunnerProcess;
}

/** SIGKILL to the runner's whole group; a group already gone is fine. */
export function killRunner(child: RunnerProcess): void {
  if (child.pid <= 0) return;
  try {
    process.kill(-child.pid, 'SIGKILL');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
  }
}
