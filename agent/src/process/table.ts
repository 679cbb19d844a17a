import { randomUUID } from 'node:crypto';
import type { ProcessLimits } from '../config.js';
import { processExited, processNotFound, ProcessError } from './errors.js';
import { launchPiped, launchPty, type Launched } from './launch.js';
import { ProcessMembers, type Signal } from './members.js';
import { CappedBuffer, OutputLog, type OutputFrame } from './output.js';
import type { LaunchRequest, Sandbox } from './sandbox.js';

/**
 * The session's processes: the running ones (at most limits.maxRunning, exec included)
 * and the last limits.keepExited that exited, whose status and kept output stay readable
 * until they are pushed out. Ids are random UUIDs. Everything ends with the session
 * (endAll: agent shutdown, and a pool reset, whose next holder must not see them).
 */

export interface ExecAnswer {
  exit_code: number;
  duration_ms: number;
  stdout_b64: string;
  stderr_b64: string;
  stdout_truncated: boolean;
  stderr_truncated: boolean;
  timed_out: boolean;
}

export interface SpawnAnswer {
  process_id: string;
  pid: number;
  started_at: string;
}

export interface StatusAnswer {
  state: 'running' | 'exited';
  exit_code: number | null;
  cpu_pct: number;
  mem_bytes: number;
}

interface Entry {
  id: string;
  launched: Launched;
  members: ProcessMembers;
  output: OutputLog;
  startedAt: number;
  exitCode: number | null;
  /** The previous status call's CPU reading, for cpu_pct over the time between two calls. */
  sample: { at: number; cpuSeconds: number };
  timer?: NodeJS.Timeout;
}

/** How long endAll waits for killed processes to be reaped. */
const END_WAIT_MS = 5000;

export class ProcessTable {
  private readonly running = new Map<string, Entry>();
  private readonly exited = new Map<string, Entry>();
  /** Execs running, and spawns not yet in `running`. */
  private starting = 0;
  private readonly execKills = new Set<ProcessMembers>();

  constructor(
    private readonly limits: ProcessLimits,
    private readonly sandbox: Sandbox,
  ) {}

  /** Takes a place among the running at once (given back by `release`), so concurrent starts cannot pass the limit. */
  private admit(): void {
    if (this.running.size + this.starting >= this.limits.maxRunning) {
      throw new ProcessError(409, 'process_limit_reached', `this browser already runs ${this.limits.maxRunning} processes (the limit); wait for one to exit or kill one`);
    }
    this.starting++;
  }

  async exec(request: LaunchRequest, timeoutSec: number): Promise<ExecAnswer> {
    this.admit();
    const started = Date.now();
    const out = { stdout: new CappedBuffer(this.limits.outputBytes), stderr: new CappedBuffer(this.limits.outputBytes) };
    try {
      await this.sandbox.checkMountPoints();
      const launched = await launchPiped(this.sandbox.plan(request), (stream, data) => out[stream].push(data), { stdin: false });
      const members = new ProcessMembers(this.sandbox.mode, launched.pid);
      this.execKills.add(members);
      let timedOut = false;
      const timer = setTimeout(() => {
        timedOut = true;
        void members.signal('KILL');
      }, timeoutSec * 1000);
      const exitCode = await launched.exited.finally(() => {
        clearTimeout(timer);
        this.execKills.delete(members);
      });
      return {
        exit_code: exitCode,
        duration_ms: Date.now() - started,
        stdout_b64: out.stdout.base64(),
        stderr_b64: out.stderr.base64(),
        stdout_truncated: out.stdout.truncated,
        stderr_truncated: out.stderr.truncated,
        timed_out: timedOut,
      };
    } finally {
      this.starting--;
    }
  }

  async spawn(request: LaunchRequest, options: { timeoutSec: number | undefined; size?: { cols: number; rows: number } }): Promise<SpawnAnswer> {
    this.admit();
    const output = new OutputLog(this.limits.outputBytes);
    const sink = (stream: 'stdout' | 'stderr', data: Buffer) => output.push(stream, data);
    let launched: Launched;
    try {
      await this.sandbox.checkMountPoints();
      const plan = this.sandbox.plan(request);
      launched = options.size ? await launchPty(plan, sink, options.size) : await launchPiped(plan, sink, { stdin: true });
    } finally {
      this.starting--;
    }
    const startedAt = Date.now();
    const entry: Entry = {
      id: randomUUID(),
      launched,
      members: new ProcessMembers(this.sandbox.mode, launched.pid),
      output,
      startedAt,
      exitCode: null,
      sample: { at: startedAt, cpuSeconds: 0 },
    };
    if (options.timeoutSec !== undefined) entry.timer = setTimeout(() => void entry.members.signal('KILL'), options.timeoutSec * 1000);
    this.running.set(entry.id, entry);
    void launched.exited.then((code) => this.onExit(entry, code));
    return { process_id: entry.id, pid: launched.pid, started_at: new Date(startedAt).toISOString() };
  }

  private onExit(entry: Entry, code: number): void {
    clearTimeout(entry.timer);
    entry.exitCode = code;
    entry.output.end(code);
    if (!this.running.delete(entry.id)) return;
    this.exited.set(entry.id, entry);
    for (const id of this.exited.keys()) {
      if (this.exited.size <= this.limits.keepExited) break;
      this.exited.delete(id);
    }
  }

  private entry(id: string): Entry {
    const entry = this.running.get(id) ?? this.exited.get(id);
    if (!entry) throw processNotFound(id);
    return entry;
  }

  private live(id: string): Entry {
    const entry = this.entry(id);
    if (entry.exitCode !== null) throw processExited(id);
    return entry;
  }

  async status(id: string): Promise<StatusAnswer> {
    const entry = this.entry(id);
    if (entry.exitCode !== null) return { state: 'exited', exit_code: entry.exitCode, cpu_pct: 0, mem_bytes: 0 };
    const { cpuSeconds, rssBytes } = await entry.members.usage();
    const now = Date.now();
    const elapsed = (now - entry.sample.at) / 1000;
    const cpuPct = elapsed > 0 ? Math.max(0, ((cpuSeconds - entry.sample.cpuSeconds) / elapsed) * 100) : 0;
    entry.sample = { at: now, cpuSeconds };
    return { state: 'running', exit_code: null, cpu_pct: Math.round(cpuPct * 10) / 10, mem_bytes: rssBytes };
  }

  async stdin(id: string, data: Buffer): Promise<{ written_bytes: number }> {
    const entry = this.live(id);
    try {
      await entry.launched.write(data);
    } catch (error) {
      throw new ProcessError(409, 'stdin_closed', `process ${id} does not take input any more: ${(error as Error).message}`);
    }
    return { written_bytes: data.length };
  }

  async kill(id: string, signal: Signal): Promise<{ ok: true }> {
    await this.live(id).members.signal(signal);
    return { ok: true };
  }

  resize(id: string, cols: number, rows: number): { ok: true } {
    const entry = this.live(id);
    if (!entry.launched.tty) throw new ProcessError(409, 'not_a_tty', `process ${id} was spawned without allocate_tty: it has no terminal to resize`);
    entry.launched.resize(cols, rows);
    return { ok: true };
  }

  /** Kept output, then live frames, then the exit frame; returns the unsubscribe. */
  subscribe(id: string, listener: (frame: OutputFrame) => void): () => void {
    return this.entry(id).output.subscribe(listener);
  }

  /** Kills every process (exec's too), waits for them, and forgets the exited ones and their output. */
  async endAll(): Promise<void> {
    const entries = [...this.running.values()];
    await Promise.all([...entries.map((entry) => entry.members.signal('KILL')), ...[...this.execKills].map((members) => members.signal('KILL'))]);
    const waited = Promise.all(entries.map((entry) => entry.launched.exited));
    await Promise.race([waited, new Promise((resolve) => setTimeout(resolve, END_WAIT_MS).unref())]);
    for (const entry of [...entries, ...this.exited.values()]) entry.output.clear();
    this.running.clear();
    this.exited.clear();
  }
}
