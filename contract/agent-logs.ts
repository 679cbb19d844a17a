/**
 * GET /browsers/{id}/logs/stream (CONTRACT.md §2.4), as the service and the agent agree
 * on it: the service checks the query (api/src/modules/browsers/logs-schema.ts) and
 * forwards it to the agent's GET /logs/stream (agent/src/logs), which checks it again.
 * Plain constants and types, no zod: the agent loads this on its first log stream.
 */

export const LOG_SOURCES = ['path', 'supervisor'] as const;
export type LogSource = (typeof LOG_SOURCES)[number];

/**
 * The session's own processes whose output the agent keeps (docs/logs.md). Kernel's
 * supervisord programs are chromium, kernel-images-api, xvfb (or xorg), neko, mutter,
 * dbus and pulseaudio; ours are Chromium, the agent (Kernel's kernel-images-api), the
 * headful browser's Xvfb and live view's x11vnc (Kernel's neko).
 */
export const SUPERVISOR_PROCESSES = ['chromium', 'agent', 'xvfb', 'x11vnc'] as const;
export type SupervisorProcess = (typeof SUPERVISOR_PROCESSES)[number];

/** Kernel's name of the in-VM server, taken as ours so a client written for Kernel works. */
export const SUPERVISOR_ALIASES: Readonly<Record<string, SupervisorProcess>> = { 'kernel-images-api': 'agent' };

export function supervisorProcessOf(name: string): SupervisorProcess | undefined {
  if ((SUPERVISOR_PROCESSES as readonly string[]).includes(name)) return name as SupervisorProcess;
  return SUPERVISOR_ALIASES[name];
}

/** One data frame of the stream: the SDK's LogEvent, plus the process for source=supervisor. */
export interface LogFrame {
  event: 'log';
  message: string;
  /** RFC 3339: when the agent read the line. */
  timestamp: string;
  /** source=supervisor only: which process wrote the line. */
  process?: SupervisorProcess;
}

/** An in-stream failure after the head was sent (CONTRACT §12.5): the stream ends after it. */
export interface LogErrorFrame {
  event: 'error';
  error: { code: string; message: string };
  timestamp: string;
}
