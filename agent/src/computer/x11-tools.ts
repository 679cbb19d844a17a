import { spawn, type ChildProcess } from 'node:child_process';
import type { XDisplay } from '../display.js';

/**
 * The X tools the computer endpoints drive, each as a short child process against the
 * browser's own display: xdotool (input and pointer position), xwd (screenshots), xclip
 * (clipboard) and unclutter-xfixes (cursor hiding).
 */

export class ComputerError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

export const badRequest = (message: string) => new ComputerError(400, 'invalid_request', message);

const TOOL_TIMEOUT_MS = 120_000;

export interface ToolResult {
  stdout: Buffer;
  stderr: string;
}

/** Runs a tool to completion; a non-zero exit is an error carrying its stderr. */
export function runTool(display: XDisplay, command: string, args: string[], options: { input?: string; timeoutMs?: number } = {}): Promise<ToolResult> {
  return new Promise((resolve, reject) => {
    const stdin = options.input === undefined ? 'ignore' : 'pipe';
    const child = spawn(command, args, { stdio: [stdin, 'pipe', 'pipe'], env: toolEnv(display), timeout: options.timeoutMs ?? TOOL_TIMEOUT_MS });
    const out: Buffer[] = [];
    let stderr = '';
    child.stdout!.on('data', (chunk: Buffer) => out.push(chunk));
    child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (stderr = (stderr + chunk).slice(-4000)));
    child.once('error', (error) => reject(new Error(`${command} could not be started: ${error.message}`)));
    child.once('close', (code, signal) => {
      if (code === 0) resolve({ stdout: Buffer.concat(out), stderr });
      else reject(new Error(`${command} failed (code ${code}, signal ${signal}): ${stderr.trim()}`));
    });
    // A tool that exits without reading its input must not turn into an EPIPE on the agent.
    child.stdin?.once('error', () => undefined).end(options.input);
  });
}

/**
 * For tools that fork a server of their own (xclip keeps the selection until another
 * client takes it): wait for the launched process only, not for the pipes its child keeps.
 */
export function runForking(display: XDisplay, command: string, args: string[], input: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ['pipe', 'ignore', 'ignore'], env: toolEnv(display) });
    child.once('error', (error) => reject(new Error(`${command} could not be started: ${error.message}`)));
    child.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`${command} exited with code ${code}`))));
    child.stdin.once('error', () => undefined).end(input);
  });
}

/** A long-running helper (unclutter); it exits on its own when the display goes away. */
export function spawnDaemon(display: XDisplay, command: string, args: string[]): ChildProcess {
  const child = spawn(command, args, { stdio: 'ignore', env: toolEnv(display) });
  child.on('error', () => undefined);
  return child;
}

export async function xdotool(display: XDisplay, args: string[]): Promise<string> {
  const { stdout, stderr } = await runTool(display, 'xdotool', args);
  // xdotool skips unknown key names with a warning and exits 0: an unknown key is the caller's mistake.
  const unknown = /No such key name '([^']*)'/.exec(stderr);
  if (unknown) throw badRequest(`unknown key name '${unknown[1]}' (use X keysym names such as Return, ctrl+t, F5)`);
  return stdout.toString('utf8');
}

function toolEnv(display: XDisplay): Record<string, string> {
  return { PATH: process.env.PATH ?? '/usr/bin:/bin', LANG: process.env.LANG ?? 'C.UTF-8', ...display.env };
}
