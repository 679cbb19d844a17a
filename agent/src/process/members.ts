import { readdir, readFile, readlink } from 'node:fs/promises';
import { processGroupMembers } from '../../../lib/process-group.js';
import type { SandboxMode } from './sandbox.js';

/**
 * The processes that make up one of the session's processes, as the host sees them: in
 * bwrap, everything in its pid namespace (whose init is bwrap's pid 1, the launcher's
 * child); unconfined, the launcher's process group. Signals, CPU and memory are counted
 * over these, so a shell's children count with the shell.
 */

export type Signal = 'TERM' | 'KILL' | 'INT' | 'HUP';

const CLOCK_TICKS = 100;
const PAGE_SIZE = 4096;

export class ProcessMembers {
  private init: number | undefined;
  private namespace: string | undefined;

  constructor(
    private readonly mode: SandboxMode,
    /** The launcher (bwrap, or the command itself when unconfined), leader of its process group. */
    private readonly launcher: number,
  ) {}

  /** pid 1 of the sandbox's pid namespace and that namespace, read once. */
  private async sandboxInit(): Promise<{ init: number; namespace: string } | undefined> {
    if (this.init !== undefined && this.namespace !== undefined) return { init: this.init, namespace: this.namespace };
    const children = await readFile(`/proc/${this.launcher}/task/${this.launcher}/children`, 'utf8').catch(() => '');
    const init = Number(children.trim().split(/\s+/)[0]);
    if (!Number.isInteger(init) || init <= 0) return undefined;
    const namespace = await readlink(`/proc/${init}/ns/pid`).catch(() => undefined);
    if (!namespace) return undefined;
    [this.init, this.namespace] = [init, namespace];
    return { init, namespace };
  }

  async pids(): Promise<number[]> {
    if (this.mode === 'unconfined') return processGroupMembers(this.launcher);
    const sandbox = await this.sandboxInit();
    if (!sandbox) return [];
    const members: number[] = [];
    for (const entry of await readdir('/proc')) {
      if (!/^\d+$/.test(entry)) continue;
      if ((await readlink(`/proc/${entry}/ns/pid`).catch(() => undefined)) === sandbox.namespace) members.push(Number(entry));
    }
    return members;
  }

  /**
   * KILL ends pid 1 of the namespace, which makes the kernel kill all the rest. The others
   * go to every process inside but pid 1 (bwrap's init, which ignores them), as a
   * terminal's ^C reaches a whole foreground job. Before the sandbox is up, the launcher
   * takes it: its death ends the sandbox (--die-with-parent).
   */
  async signal(signal: Signal): Promise<void> {
    const name = `SIG${signal}` as NodeJS.Signals;
    if (this.mode === 'unconfined') return void tryKill(-this.launcher, name);
    const sandbox = await this.sandboxInit();
    if (!sandbox) return void tryKill(this.launcher, name);
    if (signal === 'KILL') return void tryKill(sandbox.init, name);
    const targets = (await this.pids()).filter((pid) => pid !== sandbox.init);
    for (const pid of targets) tryKill(pid, name);
  }

  /** CPU seconds used so far and resident bytes, over all members. */
  async usage(): Promise<{ cpuSeconds: number; rssBytes: number }> {
    let ticks = 0;
    let pages = 0;
    for (const pid of await this.pids()) {
      const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => undefined);
      const statm = await readFile(`/proc/${pid}/statm`, 'utf8').catch(() => undefined);
      if (!stat || !statm) continue;
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      // utime and stime: fields 14 and 15 of stat(5), 12 and 13 after the name.
      ticks += Number(fields[11]) + Number(fields[12]);
      pages += Number(statm.split(' ')[1]);
    }
    return { cpuSeconds: ticks / CLOCK_TICKS, rssBytes: pages * PAGE_SIZE };
  }
}

function tryKill(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
  }
}
