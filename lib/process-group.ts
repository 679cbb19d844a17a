import { readFileSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';

/**
 * Chromium is a tree of processes (browser, zygotes, GPU, utilities, renderers) in one
 * process group, which is how the agent (and the runtime, as a last resort) finds and
 * kills all of it. Sandboxed renderers live in their own pid namespaces but keep the
 * group, as seen from ours.
 */

/**
 * Whether any process (a zombie included) is still in the group. Asked of the kernel with
 * signal 0, which costs one system call where a /proc scan reads a file per process: on a
 * machine with 1,400 processes, the scans of one browser's stop took seconds.
 */
function groupExists(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** The live (not zombie) pids whose process group is `pgid`, read from /proc. */
export async function processGroupMembers(pgid: number): Promise<number[]> {
  if (!groupExists(pgid)) return [];
  const members: number[] = [];
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = await readFile(`/proc/${entry}/stat`, 'utf8').catch(() => undefined);
    if (!stat) continue;
    // Fields after the command name, which may itself contain spaces and parentheses.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (Number(fields[2]) === pgid && fields[0] !== 'Z') members.push(Number(entry));
  }
  return members;
}

/** Signals the whole group; false when it no longer exists. */
export function signalProcessGroup(pgid: number, signal: NodeJS.Signals): boolean {
  try {
    process.kill(-pgid, signal);
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ESRCH') return false;
    throw error;
  }
}

/** Alive and not a zombie: an orphan's zombie lingers when PID 1 does not reap (containers). */
export function isProcessAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}

/** Resolves true once no live member of the group is left, false after `timeoutMs`. */
export async function waitForProcessGroupExit(pgid: number, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  // Quick at first (a closed Chromium exits within tens of milliseconds), then less often.
  for (let pauseMs = 25; ; pauseMs = Math.min(pauseMs * 2, 200)) {
    if ((await processGroupMembers(pgid)).length === 0) return true;
    if (Date.now() >= deadline) return false;
    await new Promise((resolve) => setTimeout(resolve, Math.min(pauseMs, Math.max(1, deadline - Date.now()))));
  }
}

/** SIGKILLs the group and waits (bounded) until the kernel has reaped every member. */
export async function killProcessGroup(pgid: number): Promise<void> {
  signalProcessGroup(pgid, 'SIGKILL');
  await waitForProcessGroupExit(pgid, 5000);
}

/**
 * Live processes any of whose uids (real, effective, saved, filesystem) lies in
 * [first, first + count), by uid: one read of /proc/<pid>/status per process. Processes
 * in other pid namespaces (sandboxed renderers, isolated browsers) are seen too.
 */
export async function processesOfUids(first: number, count: number): Promise<Map<number, number[]>> {
  const found = new Map<number, number[]>();
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const status = await readFile(`/proc/${entry}/status`, 'utf8').catch(() => '');
    if (/^State:\s+Z/m.test(status)) continue;
    const uids = /^Uid:\s+(.*)$/m.exec(status)?.[1]?.split(/\s+/).map(Number) ?? [];
    for (const uid of new Set(uids)) {
      if (uid < first || uid >= first + count) continue;
      found.set(uid, [...(found.get(uid) ?? []), Number(entry)]);
    }
  }
  return found;
}
