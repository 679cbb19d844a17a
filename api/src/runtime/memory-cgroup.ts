import { existsSync } from 'node:fs';
import { mkdir, readFile, rmdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Logger } from 'pino';

/**
 * One memory cgroup per browser in embedded mode: its agent, Chromium and every process the
 * session runs share a limit (BROWSERPLANE_BROWSER_MEMORY_MB), so one session that eats
 * memory is OOM-killed inside its own limit instead of starving the host and every other
 * session. The kernel's OOM killer then picks within the cgroup (Chromium's renderers
 * first: they run at oom_score_adj 300), and the agent reports the kill as telemetry
 * (agent/src/telemetry/oom-watch.ts reads the cgroup's kill counter).
 *
 * The cgroups sit under the service's own memory cgroup, in a `browserplane` child:
 * - cgroup v1 (a `memory` controller line in /proc/self/cgroup): memory.limit_in_bytes,
 *   and memory.memsw.limit_in_bytes where swap accounting exists, so the limit is not
 *   dodged into swap;
 * - cgroup v2 (one `0::` line, the unified tree at /sys/fs/cgroup): memory.max and
 *   memory.swap.max = 0. v2 lets a cgroup with processes hand no controller to its
 *   children, so this needs the service's cgroup to delegate memory already (systemd's
 *   Delegate=, a container started with its own cgroup namespace and nothing else in it).
 * Where neither works (not root, no memory controller) browsers run with no memory limit of
 * their own, as before, and the service says so once at start.
 *
 * The runtime moves the agent in right after spawning it (or before claiming a standby),
 * before the agent starts anything: every child inherits the cgroup.
 */

const CGROUP_ROOT = '/sys/fs/cgroup';

type Flavour = { version: 1; base: string } | { version: 2; base: string };

export class MemoryCgroups {
  private constructor(
    private readonly flavour: Flavour,
    private readonly limitBytes: number,
    private readonly log: Logger,
  ) {}

  /** The per-browser cgroups, or undefined (and why, in the log) where they cannot be made. */
  static async open(limitMb: number, log: Logger): Promise<MemoryCgroups | undefined> {
    if (limitMb <= 0) return undefined;
    try {
      const flavour = await locate();
      await mkdir(flavour.base, { recursive: true });
      // v2: the base holds no process, so it may hand the memory controller to its children.
      if (flavour.version === 2) await writeFile(path.join(flavour.base, 'cgroup.subtree_control'), '+memory');
      return new MemoryCgroups(flavour, limitMb * 1024 * 1024, log);
    } catch (error) {
      log.warn({ err: error }, 'no memory cgroup per browser: browsers run with no memory limit of their own (BROWSERPLANE_BROWSER_MEMORY_MB)');
      return undefined;
    }
  }

  /** Makes (or keeps) the browser's cgroup with its limit; its directory. */
  async prepare(browserId: string): Promise<string> {
    const dir = path.join(this.flavour.base, browserId);
    await mkdir(dir, { recursive: true });
    if (this.flavour.version === 1) {
      await writeFile(path.join(dir, 'memory.limit_in_bytes'), String(this.limitBytes));
      // Only where swap is accounted, and never below the memory limit (the kernel refuses it).
      if (existsSync(path.join(dir, 'memory.memsw.limit_in_bytes'))) await writeFile(path.join(dir, 'memory.memsw.limit_in_bytes'), String(this.limitBytes)).catch(() => undefined);
    } else {
      await writeFile(path.join(dir, 'memory.max'), String(this.limitBytes));
      await writeFile(path.join(dir, 'memory.swap.max'), '0').catch(() => undefined);
    }
    return dir;
  }

  /**
   * Removes the browser's cgroup once its processes are gone. A killed process leaves its
   * cgroup a moment after the kill, so a busy cgroup is tried again for a while; one still
   * busy then is left (empty cgroups cost nothing) and logged.
   */
  async remove(browserId: string): Promise<void> {
    const dir = path.join(this.flavour.base, browserId);
    for (let attempt = 0; ; attempt++) {
      try {
        await rmdir(dir);
        return;
      } catch (error) {
        const code = (error as NodeJS.ErrnoException).code;
        if (code === 'ENOENT') return;
        if (code !== 'EBUSY' || attempt >= 40) {
          this.log.warn({ err: error, browser_id: browserId }, 'memory cgroup of a browser not removed');
          return;
        }
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    }
  }
}

/** Moves `pid` (an agent that has started nothing yet) into the cgroup at `dir` (MemoryCgroups.prepare's). */
export async function joinCgroup(dir: string, pid: number): Promise<void> {
  await writeFile(path.join(dir, 'cgroup.procs'), String(pid));
}

/** Where this process's memory cgroup is, from /proc/self/cgroup. */
async function locate(): Promise<Flavour> {
  const lines = (await readFile('/proc/self/cgroup', 'utf8')).split('\n');
  const v1 = lines.map((line) => line.split(':')).find((parts) => parts.length >= 3 && parts[1]!.split(',').includes('memory'));
  if (v1) return { version: 1, base: path.join(CGROUP_ROOT, 'memory', v1.slice(2).join(':'), 'browserplane') };
  const v2 = lines.find((line) => line.startsWith('0::'));
  if (v2 && existsSync(path.join(CGROUP_ROOT, 'cgroup.controllers'))) {
    const own = path.join(CGROUP_ROOT, v2.slice(3));
    const delegated = (await readFile(path.join(own, 'cgroup.subtree_control'), 'utf8')).split(/\s+/);
    if (!delegated.includes('memory')) throw new Error(`the service's cgroup ${own} does not delegate the memory controller`);
    return { version: 2, base: path.join(own, 'browserplane') };
  }
  throw new Error('no memory cgroup controller');
}
