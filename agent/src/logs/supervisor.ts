import type { ChildProcess } from 'node:child_process';
import type { LogFrame, SupervisorProcess } from '../../../contract/agent-logs.js';
import { LOG_LIMIT_DEFAULTS, type LogLimits } from './limits.js';
import { LineSplitter } from './lines.js';

/**
 * The output of the session's own processes (source=supervisor, docs/logs.md): a bounded
 * ring of lines per process, fed where each process is started (Chromium's stderr, the
 * agent's own log lines, Xvfb's and x11vnc's stderr, see superviseProcess) and read by
 * the log streams. One
 * agent serves one browser, so one instance per process, like the BiDi client registry
 * and the VNC servers. Nothing is imported beyond the line splitter: the logger feeds it
 * from the first line.
 */

export interface SupervisorLine {
  /** Order across processes, so "every process" replays lines as they came. */
  seq: number;
  frame: LogFrame & { process: SupervisorProcess };
}

type Listener = (line: SupervisorLine) => void;

class Ring {
  readonly lines: SupervisorLine[] = [];
  private bytes = 0;

  push(line: SupervisorLine, limits: LogLimits): void {
    this.lines.push(line);
    this.bytes += line.frame.message.length;
    while (this.lines.length > 1 && (this.lines.length > limits.ringLines || this.bytes > limits.ringBytes)) {
      this.bytes -= this.lines.shift()!.frame.message.length;
    }
  }

  clear(): void {
    this.lines.length = 0;
    this.bytes = 0;
  }
}

export class SupervisorLogs {
  /** AGENT_LOGS_* (limits.ts), set by configure at start. */
  limits: LogLimits = LOG_LIMIT_DEFAULTS;
  private seq = 0;
  private readonly rings = new Map<SupervisorProcess, Ring>();
  private readonly splitters = new Map<SupervisorProcess, LineSplitter>();
  private readonly listeners = new Set<Listener>();
  private readonly streamEnders = new Set<() => void>();

  /** The limits from the agent's configuration (main.ts), before the first line. */
  configure(limits: LogLimits): void {
    this.limits = limits;
  }

  /** A chunk of a process's output, split into lines as it comes. */
  feed(process: SupervisorProcess, chunk: Buffer | string): void {
    let splitter = this.splitters.get(process);
    if (!splitter) {
      splitter = new LineSplitter(this.limits.lineBytes, (message) => this.add(process, message));
      this.splitters.set(process, splitter);
    }
    splitter.push(chunk);
  }

  /** A process ended: its last line, if it had no newline, is kept too. */
  ended(process: SupervisorProcess): void {
    this.splitters.get(process)?.flush();
  }

  /** A line of the agent's own about a process (its start, its exit), among the process's lines. */
  note(process: SupervisorProcess, message: string): void {
    this.add(process, message);
  }

  /** The lines kept (of one process, or of all in the order they came), oldest first. */
  buffered(process: SupervisorProcess | undefined): SupervisorLine[] {
    if (process) return [...(this.rings.get(process)?.lines ?? [])];
    return [...this.rings.values()].flatMap((ring) => ring.lines).sort((a, b) => a.seq - b.seq);
  }

  /** Every new line from now on; returns the unsubscribe. */
  subscribe(listener: Listener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** An open log stream, ended by resetForNextHolder; returns the untrack. */
  trackStream(end: () => void): () => void {
    this.streamEnders.add(end);
    return () => this.streamEnders.delete(end);
  }

  get openStreams(): number {
    return this.streamEnders.size;
  }

  /**
   * A pool release (reset.ts): the previous holder's streams end and the lines kept are
   * forgotten, as its processes' output is (process/table.ts).
   */
  resetForNextHolder(): void {
    for (const end of [...this.streamEnders]) end();
    this.streamEnders.clear();
    for (const ring of this.rings.values()) ring.clear();
    for (const splitter of this.splitters.values()) splitter.discard();
  }

  private add(process: SupervisorProcess, message: string): void {
    const line: SupervisorLine = { seq: ++this.seq, frame: { event: 'log', message, timestamp: new Date().toISOString(), process } };
    let ring = this.rings.get(process);
    if (!ring) {
      ring = new Ring();
      this.rings.set(process, ring);
    }
    ring.push(line, this.limits);
    for (const listener of this.listeners) listener(line);
  }
}

export const supervisorLogs = new SupervisorLogs();

/**
 * A child process's stderr becomes its log, between two lines in supervisord's words
 * ("spawned: 'xvfb' with pid 12", "exited: xvfb (exit status 0)"): Xvfb and x11vnc say
 * little or nothing themselves, so a stream of them still shows that they run.
 */
export function superviseProcess(process: SupervisorProcess, child: ChildProcess): void {
  if (child.pid !== undefined) supervisorLogs.note(process, `spawned: '${process}' with pid ${child.pid}`);
  child.stderr?.on('data', (chunk: Buffer | string) => supervisorLogs.feed(process, chunk));
  child.once('close', (code, signal) => {
    supervisorLogs.ended(process);
    supervisorLogs.note(process, `exited: ${process} (${signal ? `terminated by ${signal}` : `exit status ${code}`})`);
  });
}
