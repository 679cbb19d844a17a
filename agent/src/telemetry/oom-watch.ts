import { closeSync, constants, openSync, readFileSync, readSync } from 'node:fs';
import path from 'node:path';
import type { TelemetryEvent } from '../../../contract/telemetry.js';
import { parseOomReports, topTasks, type OomReport } from './oom-report.js';

/**
 * system_oom_kill: the kernel's OOM killer ended a process of this browser (Chromium, one of
 * its renderers, a process the session ran). The agent's memory cgroup (in embedded mode
 * the one the runtime made for this browser, api/src/runtime/memory-cgroup.ts; in a pod the
 * container's) counts kills: memory.oom_control's oom_kill (cgroup v1) or memory.events'
 * (v2). The counter is read every POLL_MS, a small file read; when it grows, the kernel's
 * report is read from /dev/kmsg (oom-report.ts) for what was killed, and only reports of this
 * cgroup count.
 *
 * What stays out of the event: a global OOM (constraint none) prints every task of the host,
 * other sessions' among them, and the host's memory: then only the killed process itself is
 * reported (no top_tasks, trigger only when it was the killed process, no mem_*). A cgroup
 * kill lists this cgroup's tasks only, and those are reported.
 *
 * /dev/kmsg needs root (or CAP_SYSLOG): the embedded agent has it; a browser pod's agent does
 * not, and there the kill is only logged, with no event (no pid or name to report).
 */

export const OOM_POLL_MS = 1000;
/** Records read from /dev/kmsg at most per look: its whole buffer is far fewer. */
const MAX_RECORDS = 200_000;

interface Counter {
  file: string;
  /** The cgroup as the kernel names it in a report's task_memcg. */
  cgroup: string;
}

/** This process's memory cgroup kill counter, or undefined where there is none. */
export function locateOomCounter(procSelfCgroup = '/proc/self/cgroup', root = '/sys/fs/cgroup'): Counter | undefined {
  let lines: string[];
  try {
    lines = readFileSync(procSelfCgroup, 'utf8').split('\n');
  } catch {
    return undefined;
  }
  const v1 = lines.map((line) => line.split(':')).find((parts) => parts.length >= 3 && parts[1]!.split(',').includes('memory'));
  if (v1) {
    const cgroup = v1.slice(2).join(':');
    return { file: path.join(root, 'memory', cgroup, 'memory.oom_control'), cgroup };
  }
  const v2 = lines.find((line) => line.startsWith('0::'));
  return v2 ? { file: path.join(root, v2.slice(3), 'memory.events'), cgroup: v2.slice(3) } : undefined;
}

function readKills(file: string): number | undefined {
  try {
    const match = /^oom_kill (\d+)$/m.exec(readFileSync(file, 'utf8'));
    return match ? Number(match[1]) : undefined;
  } catch {
    return undefined;
  }
}

/** Every record of the kernel's log buffer, oldest first; undefined if it cannot be read. */
function readKmsg(): string[] | undefined {
  let fd: number;
  try {
    fd = openSync('/dev/kmsg', constants.O_RDONLY | constants.O_NONBLOCK);
  } catch {
    return undefined;
  }
  const records: string[] = [];
  const buffer = Buffer.alloc(16 * 1024);
  try {
    while (records.length < MAX_RECORDS) {
      try {
        const n = readSync(fd, buffer, 0, buffer.length, null);
        if (n <= 0) break;
        records.push(buffer.toString('utf8', 0, n));
      } catch (error) {
        // EPIPE: records were overwritten while reading; the next read goes on from the oldest kept.
        if ((error as NodeJS.ErrnoException).code === 'EPIPE') continue;
        break;
      }
    }
  } finally {
    closeSync(fd);
  }
  return records;
}

const ofCgroup = (report: OomReport, cgroup: string) => report.cgroup === cgroup || (cgroup !== '/' && report.cgroup?.endsWith(cgroup) === true && report.cgroup[report.cgroup.length - cgroup.length - 1] === '/');

/** The event of one report, with nothing of other sessions' or the host's (see above). */
export function oomEvent(report: OomReport): Omit<TelemetryEvent, 'ts'> {
  const own = report.constraint !== undefined && report.constraint !== 'none';
  const data = {
    pid: report.pid,
    process_name: report.process_name,
    rss_kb: report.rss_kb,
    ...(report.constraint ? { constraint: report.constraint } : {}),
    ...(own ? { top_tasks: topTasks(report.tasks) } : {}),
    ...(own && report.mem_free_kb !== undefined ? { mem_free_kb: report.mem_free_kb } : {}),
    ...(own && report.mem_total_kb !== undefined ? { mem_total_kb: report.mem_total_kb } : {}),
    ...((own || report.trigger_pid === report.pid) && report.trigger_pid !== undefined ? { trigger_pid: report.trigger_pid } : {}),
    ...((own || report.trigger_pid === report.pid) && report.trigger_process_name ? { trigger_process_name: report.trigger_process_name } : {}),
  };
  return { category: 'system', type: 'system_oom_kill', source: { kind: 'local_process', event: 'oom_kill' }, data };
}

/** Watches this agent's cgroup for OOM kills; `emit` gets one event per kill. */
export class OomWatch {
  private timer?: NodeJS.Timeout;
  private kills: number | undefined;
  /** Reports before this (µs, the kernel's monotonic clock) are another browser's of the same name. */
  private readonly sinceUsec = Number(process.hrtime.bigint() / 1000n);
  private lastSeq = -1;
  private warned = false;

  constructor(
    private readonly counter: Counter,
    private readonly emit: (event: Omit<TelemetryEvent, 'ts'>) => void,
    private readonly warn: (message: string) => void,
  ) {
    this.kills = readKills(counter.file);
  }

  start(): void {
    this.timer ??= setInterval(() => this.check(), OOM_POLL_MS);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Looks now (also on the way out: Chromium's own death may have been an OOM kill). */
  check(): void {
    const kills = readKills(this.counter.file);
    if (kills === undefined || this.kills === undefined || kills <= this.kills) {
      this.kills ??= kills;
      return;
    }
    this.kills = kills;
    const records = readKmsg();
    if (!records) {
      if (!this.warned) this.warn('an OOM kill in this browser; /dev/kmsg cannot be read here, so no system_oom_kill event says what was killed');
      this.warned = true;
      return;
    }
    for (const report of parseOomReports(records)) {
      if (report.seq <= this.lastSeq || report.usec < this.sinceUsec || !ofCgroup(report, this.counter.cgroup)) continue;
      this.lastSeq = report.seq;
      this.emit(oomEvent(report));
    }
  }
}
