/**
 * Helpers the API benchmarks share: autocannon runs described as data, plain JSON
 * calls, and what /proc says about a process and the machine.
 */
import type { ChildProcess } from 'node:child_process';
import { readdir, readFile } from 'node:fs/promises';
import { createInterface } from 'node:readline';
import autocannon from 'autocannon';

export interface Scenario {
  name: string;
  method?: 'GET' | 'POST';
  path: string;
  body?: () => string;
}

export interface LoadOptions {
  connections: number;
  durationS: number;
}

/** One autocannon run of a scenario against `url` (the service's base URL). */
export function runAutocannon(url: string, scenario: Scenario, headers: Record<string, string>, options: LoadOptions): Promise<autocannon.Result> {
  return autocannon({
    url: url + scenario.path,
    method: scenario.method ?? 'GET',
    headers,
    connections: options.connections,
    duration: options.durationS,
    ...(scenario.body
      ? { requests: [{ method: 'POST' as const, path: scenario.path, setupRequest: (req: autocannon.Request) => ({ ...req, body: scenario.body!() }) }] }
      : {}),
  });
}

export function post(url: string, route: string, body: unknown, headers: Record<string, string>): Promise<Response> {
  return fetch(url + route, { method: 'POST', headers, body: JSON.stringify(body) });
}

/** A JSON call that must answer `status`; its parsed body. */
export async function callJson<T>(url: string, method: string, route: string, headers: Record<string, string>, status: number, body?: unknown): Promise<T> {
  const res = await fetch(url + route, { method, headers, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
  const text = await res.text();
  if (res.status !== status) throw new Error(`${method} ${route}: ${res.status} ${text.slice(0, 500)}`);
  return (text ? JSON.parse(text) : undefined) as T;
}

export const quantile = (values: number[], q: number): number =>
  values.length === 0 ? NaN : [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.floor(q * values.length))]!;

export const mib = (bytes: number): string => (bytes / 1024 / 1024).toFixed(0);

export interface ProcessStats {
  rssBytes: number;
  fds: number;
  /** User + system CPU time used so far. */
  cpuSeconds: number;
}

// USER_HZ: the unit of the CPU times in /proc/<pid>/stat, 100 on every Linux ABI Node runs on.
const CLOCK_TICKS = 100;

/** Resident memory, open file descriptors and CPU time of one process. */
export async function processStats(pid: number): Promise<ProcessStats> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const rssKb = Number(/^VmRSS:\s+(\d+) kB/m.exec(status)?.[1] ?? NaN);
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command name (which may hold spaces): state is field 3, utime 14, stime 15.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const cpuSeconds = (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
  return { rssBytes: rssKb * 1024, fds: (await readdir(`/proc/${pid}/fd`)).length, cpuSeconds };
}

/** The soft limit on open files of a process (the one that refuses the next socket). */
export async function openFilesLimit(pid: number | 'self'): Promise<number> {
  const limits = await readFile(`/proc/${pid}/limits`, 'utf8');
  const soft = /^Max open files\s+(\S+)/m.exec(limits)?.[1];
  return soft === 'unlimited' ? Infinity : Number(soft);
}

/** Memory in use on the machine (MemTotal − MemAvailable): what the page cache cannot give back. */
export async function machineMemoryUsed(): Promise<number> {
  const info = await readFile('/proc/meminfo', 'utf8');
  const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(info)?.[1] ?? NaN) * 1024;
  return kb('MemTotal') - kb('MemAvailable');
}

/** The service's error and fatal log lines, counted by message, as they come. */
export function tapServiceErrors(child: ChildProcess): Map<string, number> {
  const counts = new Map<string, number>();
  createInterface({ input: child.stdout! }).on('line', (line) => {
    // The service logs level labels, not numbers.
    let entry: { level?: string; msg?: string; err?: { message?: string } };
    try {
      entry = JSON.parse(line) as typeof entry;
    } catch {
      return; // not a log line
    }
    if (entry.level !== 'error' && entry.level !== 'fatal') return;
    const key = `${entry.msg ?? '?'}${entry.err?.message ? `: ${entry.err.message}` : ''}`;
    counts.set(key, (counts.get(key) ?? 0) + 1);
  });
  return counts;
}

/** Processes on the machine: the runtime scans all of /proc when it stops a browser. */
export async function processCount(): Promise<number> {
  return (await readdir('/proc')).filter((entry) => /^\d+$/.test(entry)).length;
}

/** CPU time run and time spent runnable but waiting for a CPU, in ms, summed over processes (/proc/<pid>/task/<tid>/schedstat, ns). */
export interface SchedTimes {
  cpuMs: number;
  waitMs: number;
}

/** Run and run-queue wait times of every thread of `pids`; a process gone meanwhile counts nothing. */
export async function schedTimes(pids: readonly number[]): Promise<SchedTimes> {
  const total: SchedTimes = { cpuMs: 0, waitMs: 0 };
  await Promise.all(
    pids.map(async (pid) => {
      const tids = await readdir(`/proc/${pid}/task`).catch(() => [] as string[]);
      await Promise.all(
        tids.map(async (tid) => {
          const text = await readFile(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').catch(() => '');
          const [run, wait] = text.split(' ').map(Number);
          if (run === undefined || wait === undefined || Number.isNaN(run) || Number.isNaN(wait)) return;
          total.cpuMs += run / 1e6;
          total.waitMs += wait / 1e6;
        }),
      );
    }),
  );
  return total;
}

/** Every process below `root` (children, grandchildren…) whose command name is `comm`. */
export async function descendantsNamed(root: number, comm: string): Promise<number[]> {
  const parentOf = new Map<number, number>();
  const nameOf = new Map<number, string>();
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = await readFile(`/proc/${entry}/stat`, 'utf8').catch(() => '');
    if (!stat) continue;
    const close = stat.lastIndexOf(')');
    nameOf.set(Number(entry), stat.slice(stat.indexOf('(') + 1, close));
    parentOf.set(Number(entry), Number(stat.slice(close + 2).split(' ')[1]));
  }
  const below = (pid: number): boolean => {
    for (let p = parentOf.get(pid); p !== undefined && p > 1; p = parentOf.get(p)) if (p === root) return true;
    return false;
  };
  return [...nameOf].filter(([pid, name]) => name === comm && below(pid)).map(([pid]) => pid);
}
