import { spawn } from 'node:child_process';
import { constants } from 'node:os';
import type { LaunchPlan } from './sandbox.js';
import type { StreamName } from './output.js';

/**
 * Starting a planned launch (sandbox.ts) with pipes (stdout and stderr apart) or on a
 * pseudo-terminal (one stream, stdout). node-pty (@lydell/node-pty: node-pty's own code
 * with prebuilt binaries, so no compiler on the host or in the image) because Node has no
 * pty of its own and `script`-style wrappers cannot resize the terminal afterwards.
 */

export interface Launched {
  /** The launcher's pid on the host (bwrap's, or the command's when unconfined). */
  pid: number;
  tty: boolean;
  write(data: Buffer): Promise<void>;
  resize(cols: number, rows: number): void;
  /** The exit code; 128 + the signal's number when a signal ended it. */
  exited: Promise<number>;
}

export type OutputSink = (stream: StreamName, data: Buffer) => void;

const codeOf = (code: number | null, signal: NodeJS.Signals | number | null | undefined): number => {
  if (typeof signal === 'number' && signal > 0) return 128 + signal;
  if (typeof signal === 'string') return 128 + (constants.signals[signal] ?? 0);
  return code ?? 0;
};

export function launchPiped(plan: LaunchPlan, sink: OutputSink, options: { stdin: boolean }): Promise<Launched> {
  const child = spawn(plan.command, plan.args, {
    cwd: plan.cwd,
    env: plan.env,
    // Its own process group, so nothing aimed at the agent's group reaches it, and the reverse.
    detached: true,
    stdio: [options.stdin ? 'pipe' : 'ignore', 'pipe', 'pipe'],
  });
  child.stdout!.on('data', (data: Buffer) => sink('stdout', data));
  child.stderr!.on('data', (data: Buffer) => sink('stderr', data));
  // A process that exits without reading its stdin makes our writes fail with EPIPE: not ours to report.
  child.stdin?.on('error', () => undefined);
  const exited = new Promise<number>((resolve) => child.once('close', (code, signal) => resolve(codeOf(code, signal))));
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('spawn', () =>
      resolve({
        pid: child.pid!,
        tty: false,
        exited,
        write: (data) =>
          new Promise<void>((done, fail) => {
            if (!child.stdin || child.stdin.destroyed) return fail(new Error('stdin is closed'));
            child.stdin.write(data, (error) => (error ? fail(error) : done()));
          }),
        resize: () => {
          throw new Error('not a terminal');
        },
      }),
    );
  });
}

export async function launchPty(plan: LaunchPlan, sink: OutputSink, size: { cols: number; rows: number }): Promise<Launched> {
  const { default: pty } = await import('@lydell/node-pty');
  const terminal = pty.spawn(plan.command, plan.args, { name: 'xterm-256color', cols: size.cols, rows: size.rows, cwd: plan.cwd, env: plan.env, encoding: null });
  terminal.onData((data: string | Buffer) => sink('stdout', Buffer.isBuffer(data) ? data : Buffer.from(data)));
  const exited = new Promise<number>((resolve) => terminal.onExit(({ exitCode, signal }) => resolve(codeOf(exitCode, signal))));
  return {
    pid: terminal.pid,
    tty: true,
    exited,
    write: (data) => {
      // node-pty writes Buffers as they are (its typing says string).
      terminal.write(data as unknown as string);
      return Promise.resolve();
    },
    resize: (cols, rows) => terminal.resize(cols, rows),
  };
}
