/**
 * Reads the kernel's OOM-killer reports out of /dev/kmsg records (pure; oom-watch.ts feeds
 * it). One report, as the kernel prints it (6.x; older kernels print fewer columns):
 *
 *   tail invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=0
 *   CPU: 0 UID: 0 PID: 23688 Comm: tail Not tainted 6.18.44 #1
 *   ...call trace, memory stats...
 *   Mem-Info:                                   (a global OOM only)
 *   active_anon:.. free:123 free_pcp:..
 *   6291456 pages RAM
 *   Tasks state (memory values in pages):
 *   [  pid  ]   uid  tgid total_vm      rss rss_anon rss_file rss_shmem pgtables_bytes swapents oom_score_adj name
 *   [  23688]     0 23688    16938    16589    16192      397         0   176128        0             0 tail
 *   oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,oom_memcg=/a,task_memcg=/a,task=tail,pid=23688,uid=0
 *   Memory cgroup out of memory: Killed process 23688 (tail) total-vm:67752kB, anon-rss:64768kB, file-rss:1588kB, shmem-rss:0kB, UID:0 ...
 *
 * A record is `<prio>,<seq>,<usec>,<flags>;<message>`, then continuation lines (" KEY=value")
 * that are skipped. Pages are taken as 4 KiB, as Kernel's producer does.
 */

const PAGE_KB = 4;
const TOP_TASKS = 5;

export interface OomTask {
  pid: number;
  name: string;
  rss_kb: number;
}

export interface OomReport {
  /** kmsg sequence number of the report's last line: each report is taken once. */
  seq: number;
  /** Its time, µs on the kernel's monotonic clock (process.hrtime's). */
  usec: number;
  /** The cgroup the killed task was in (task_memcg), as the kernel names it. */
  cgroup?: string;
  pid: number;
  process_name: string;
  rss_kb: number;
  constraint?: 'none' | 'memcg' | 'cpuset' | 'memory_policy';
  mem_free_kb?: number;
  mem_total_kb?: number;
  trigger_pid?: number;
  trigger_process_name?: string;
  /** Every task of the report's table (the caller keeps its own and the top ones). */
  tasks: OomTask[];
}

const CONSTRAINTS: Record<string, OomReport['constraint']> = {
  CONSTRAINT_NONE: 'none',
  CONSTRAINT_MEMCG: 'memcg',
  CONSTRAINT_CPUSET: 'cpuset',
  CONSTRAINT_MEMORY_POLICY: 'memory_policy',
};

interface Partial {
  trigger_process_name?: string;
  trigger_pid?: number;
  mem_free_kb?: number;
  mem_total_kb?: number;
  columns?: string[];
  tasks: OomTask[];
  constraint?: OomReport['constraint'];
  cgroup?: string;
}

/** Every complete OOM report in `records` (kmsg records in order, oldest first). */
export function parseOomReports(records: Iterable<string>): OomReport[] {
  const reports: OomReport[] = [];
  let current: Partial | undefined;
  for (const record of records) {
    const head = /^(\d+),(\d+),(\d+),[^;]*;(.*)$/s.exec(record);
    if (!head) continue;
    const seq = Number(head[2]);
    const usec = Number(head[3]);
    const message = head[4]!.split('\n')[0]!;
    const invoked = /^(\S+) invoked oom-killer:/.exec(message);
    if (invoked) {
      current = { trigger_process_name: invoked[1]!, tasks: [] };
      continue;
    }
    if (!current) continue;
    readLine(current, message);
    const killed = /(?:out of memory|Out of memory).*: Killed process (\d+) \((.*)\) .*?anon-rss:(\d+)kB, file-rss:(\d+)kB, shmem-rss:(\d+)kB/.exec(message);
    if (killed) {
      const { columns: _columns, ...known } = current;
      reports.push({ ...known, seq, usec, pid: Number(killed[1]), process_name: killed[2]!, rss_kb: Number(killed[3]) + Number(killed[4]) + Number(killed[5]) });
      current = undefined;
    }
  }
  return reports;
}

function readLine(report: Partial, message: string): void {
  const cpu = /^CPU: \d+ (?:UID: \d+ )?PID: (\d+) Comm: (\S+)/.exec(message);
  if (cpu && report.trigger_pid === undefined) report.trigger_pid = Number(cpu[1]);
  const free = /^active_anon:.*\bfree:(\d+)/.exec(message);
  if (free) report.mem_free_kb = Number(free[1]) * PAGE_KB;
  const ram = /^(\d+) pages RAM$/.exec(message.trim());
  if (ram) report.mem_total_kb = Number(ram[1]) * PAGE_KB;
  if (/^\[\s*pid\s*\]/.test(message)) report.columns = message.replace(/^\[\s*pid\s*\]/, 'pid').trim().split(/\s+/);
  const row = /^\[\s*(\d+)\]\s+(.*)$/.exec(message);
  if (row && report.columns) {
    const values = [row[1]!, ...row[2]!.trim().split(/\s+/)];
    const rss = Number(values[report.columns.indexOf('rss')]);
    const name = values.slice(report.columns.indexOf('name')).join(' ');
    if (Number.isFinite(rss) && name) report.tasks.push({ pid: Number(values[0]), name, rss_kb: rss * PAGE_KB });
  }
  const kill = /^oom-kill:(.*)$/.exec(message);
  if (kill) {
    const fields = new Map(kill[1]!.split(',').map((pair) => [pair.slice(0, pair.indexOf('=')), pair.slice(pair.indexOf('=') + 1)] as const));
    report.constraint = CONSTRAINTS[fields.get('constraint') ?? ''];
    const cgroup = fields.get('task_memcg');
    if (cgroup) report.cgroup = cgroup;
  }
}

/** The `top_tasks` of an event: the largest first, at most five. */
export function topTasks(tasks: readonly OomTask[]): OomTask[] {
  return [...tasks].sort((a, b) => b.rss_kb - a.rss_kb).slice(0, TOP_TASKS);
}
