import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import type { Sandbox } from '../process/sandbox.js';

/**
 * How a Playwright runner is started: in the session's process sandbox (agent/src/process/
 * sandbox.ts), like any process of browsers.process. In embedded mode that is bubblewrap
 * as the session's unprivileged user, no new privileges, its own pid namespace (it can
 * signal nothing else: not the agent, not Chromium, not another session), the session's
 * files as "/" and private /tmp and /run, so nothing of the service's or of other
 * sessions is even visible and nothing the code leaves in /tmp outlives it. The runner,
 * its compiled neighbours and playwright-core are bound read-only under
 * /run/browserplane/app (the service's checkout or the image's /app: code, no secrets),
 * and Node itself from /usr, or bound next to them when it lives elsewhere.
 *
 * In a browser pod without user namespaces the sandbox is "unconfined": the runner runs as
 * the agent's own user with no new privileges, and the pod is the boundary.
 *
 * Not done here: a network namespace (the runner's own requests bypass the browser's
 * proxy forwarder and its private-network block; the CDP connection back to this agent
 * is over loopback).
 *
 * The launcher leads a process group of its own (detached), which killRunner kills as a
 * whole; bwrap's --die-with-parent and the pid namespace take everything the code started
 * with it.
 */

/** The package root: dist/agent/src/playwright/ is four levels below it. */
const APP_ROOT = fileURLToPath(new URL('../../../../', import.meta.url));
const RUNNER_FROM_ROOT = 'dist/agent/src/playwright/runner.js';
const APP_INSIDE = '/run/browserplane/app';
const NODE_INSIDE = '/run/browserplane/node';

export interface RunnerLaunch {
  /** Node's own flags, before the runner's path. */
  nodeArgs: string[];
  /** The runner's environment on top of the sandbox's (PATH, HOME, LANG): nothing of the agent's. */
  env: Record<string, string>;
}

/** stdin, stdout, stderr, and fd 3 for the runner's reports (protocol.ts). */
export type RunnerProcess = ChildProcess & { pid: number };

export function spawnRunner(sandbox: Sandbox, launch: RunnerLaunch): RunnerProcess {
  const inside = sandbox.mode === 'bwrap';
  const nodeOutside = process.execPath;
  const nodeInUsr = nodeOutside.startsWith('/usr/');
  const readOnly = inside
    ? [
        { source: path.join(APP_ROOT, 'dist'), target: `${APP_INSIDE}/dist` },
        { source: path.join(APP_ROOT, 'node_modules'), target: `${APP_INSIDE}/node_modules` },
        // "type": "module": the runner's .js files are ES modules.
        { source: path.join(APP_ROOT, 'package.json'), target: `${APP_INSIDE}/package.json` },
        ...(nodeInUsr ? [] : [{ source: nodeOutside, target: NODE_INSIDE }]),
      ]
    : [];
  const node = inside && !nodeInUsr ? NODE_INSIDE : nodeOutside;
  const runner = path.join(inside ? APP_INSIDE : APP_ROOT, RUNNER_FROM_ROOT);
  const plan = sandbox.plan({
    command: node,
    args: [...launch.nodeArgs, runner],
    env: { ...(inside ? { TMPDIR: '/tmp' } : {}), ...launch.env },
    cwd: '/',
    tty: false,
    readOnly,
  });
  // pdeathsig: the launcher dies with the agent whatever becomes of it; no_new_privs also
  // where the sandbox is unconfined (setuid binaries do not elevate).
  const child = spawn('setpriv', ['--pdeathsig=KILL', '--no-new-privs', '--', plan.command, ...plan.args], {
    env: plan.env,
    cwd: plan.cwd,
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
