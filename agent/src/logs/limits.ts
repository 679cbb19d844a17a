/**
 * The log streams' limits (docs/logs.md), from the agent's environment like the process
 * limits (AGENT_PROCESS_*): parsed at start by parseStandbyConfig, so a bad value stops
 * the agent there. Nothing is imported: the logger takes these before anything loads.
 */

export interface LogLimits {
  /** AGENT_LOGS_RING_LINES: lines kept per supervised process (chromium, agent, xvfb, x11vnc). */
  ringLines: number;
  /** AGENT_LOGS_RING_KB: bytes kept per supervised process; the oldest lines go first. */
  ringBytes: number;
  /** AGENT_LOGS_LINE_KB: a longer line is cut there and ends with LINE_CUT_MARK. */
  lineBytes: number;
  /** AGENT_LOGS_TAIL_LINES: lines of a file's end sent first (source=path). */
  tailLines: number;
  /** AGENT_LOGS_TAIL_KB: how far back from a file's end those lines are looked for. */
  tailBytes: number;
  /** AGENT_LOGS_MAX_STREAMS: log streams open at once per browser; one more is 409 log_stream_limit_reached. */
  maxStreams: number;
}

/** What ends a line cut at lineBytes. */
export const LINE_CUT_MARK = ' …[line cut]';

export const LOG_LIMIT_DEFAULTS: LogLimits = {
  ringLines: 1000,
  ringBytes: 1024 * 1024,
  lineBytes: 16 * 1024,
  tailLines: 1000,
  tailBytes: 1024 * 1024,
  maxStreams: 8,
};

function integer(env: NodeJS.ProcessEnv, name: string, fallback: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 1 || value > max) throw new Error(`${name} must be an integer in 1..${max}`);
  return value;
}

export function parseLogLimits(env: NodeJS.ProcessEnv): LogLimits {
  const d = LOG_LIMIT_DEFAULTS;
  return {
    ringLines: integer(env, 'AGENT_LOGS_RING_LINES', d.ringLines, 1_000_000),
    ringBytes: integer(env, 'AGENT_LOGS_RING_KB', d.ringBytes / 1024, 1024 * 1024) * 1024,
    lineBytes: integer(env, 'AGENT_LOGS_LINE_KB', d.lineBytes / 1024, 1024) * 1024,
    tailLines: integer(env, 'AGENT_LOGS_TAIL_LINES', d.tailLines, 1_000_000),
    tailBytes: integer(env, 'AGENT_LOGS_TAIL_KB', d.tailBytes / 1024, 1024 * 1024) * 1024,
    maxStreams: integer(env, 'AGENT_LOGS_MAX_STREAMS', d.maxStreams, 1024),
  };
}
