import { z } from 'zod';
import { browserIdParams } from './schema.js';

/**
 * Bodies and answers of CONTRACT.md §2.4 (browsers.process), as @onkernel/sdk sends and
 * reads them. The agent checks the bodies again and applies the limits (docs/processes.md).
 */

const noNul = (what: string) => z.string().refine((value) => !value.includes('\0'), `${what} must not contain NUL`);

const commandFields = {
  command: noNul('command').pipe(z.string().min(1).max(4096)).describe('Executable to run (looked up in PATH); not a shell line: use "sh" with args ["-c", ...] for one'),
  args: z.array(noNul('an argument').pipe(z.string().max(128 * 1024))).max(4096).optional().describe('Arguments'),
  as_root: z.boolean().optional().describe('Refused (400 as_root_unsupported) when true: processes run as the browser\'s unprivileged user'),
  as_user: z.string().max(256).nullable().optional().describe("The browser's own user only (its name or uid); anything else is 400 as_user_unsupported"),
  cwd: noNul('cwd')
    .pipe(z.string().max(4096).regex(/^\//, 'must be an absolute path'))
    .nullable()
    .optional()
    .describe('Working directory inside the browser filesystem (default "/")'),
  env: z
    .record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]{0,255}$/, 'an environment variable name is letters, digits and _, not starting with a digit'), noNul('an environment value'))
    .refine((env) => Object.keys(env).length <= 256, 'at most 256 environment variables')
    .optional()
    .describe('Environment variables, over the defaults (PATH, HOME=/, LANG, and DISPLAY and XAUTHORITY on headful browsers)'),
  timeout_sec: z
    .number()
    .positive()
    .max(7 * 24 * 3600)
    .nullable()
    .optional()
    .describe('Seconds before the process is killed. exec: default 60, at most 240; spawn: none by default'),
};

const terminalSize = (what: string) => z.number().int().min(1).max(1000).describe(what);

export const execBody = z.strictObject(commandFields);
export const spawnBody = z.strictObject({
  ...commandFields,
  allocate_tty: z.boolean().optional().describe('Run on a pseudo-terminal: one output stream (stdout), resizable'),
  cols: terminalSize('Terminal columns (default 80), with allocate_tty').optional(),
  rows: terminalSize('Terminal rows (default 24), with allocate_tty').optional(),
});
export const stdinBody = z.strictObject({
  data_b64: z
    .string()
    .max(24 * 1024 * 1024)
    .regex(/^[A-Za-z0-9+/]*={0,2}$/, 'must be base64')
    .describe('Bytes to write, base64 (at most 1 MiB decoded by default)'),
});
export const killBody = z.strictObject({ signal: z.enum(['TERM', 'KILL', 'INT', 'HUP']).describe("Signal for every process of the process's sandbox") });
export const resizeBody = z.strictObject({ cols: terminalSize('Terminal columns'), rows: terminalSize('Terminal rows') });

export const processParams = browserIdParams.extend({
  process_id: z.string().uuid().describe('process_id from spawn'),
});

export const execResultSchema = z.object({
  exit_code: z.number().describe('Exit code; 128 + the signal number when a signal ended it'),
  duration_ms: z.number(),
  stdout_b64: z.string(),
  stderr_b64: z.string(),
  stdout_truncated: z.boolean().describe('stdout passed the cap (1 MiB by default) and was cut there'),
  stderr_truncated: z.boolean().describe('stderr passed the cap and was cut there'),
  timed_out: z.boolean().describe('timeout_sec passed and the process was killed'),
});
export const spawnResultSchema = z.object({ process_id: z.string(), pid: z.number(), started_at: z.string() });
export const statusSchema = z.object({
  state: z.enum(['running', 'exited']),
  exit_code: z.number().nullable(),
  cpu_pct: z.number().describe('CPU use since the previous status call (or the start), percent of one core'),
  mem_bytes: z.number().describe('Resident memory of all its processes'),
});
export const stdinResultSchema = z.object({ written_bytes: z.number() });
export const okSchema = z.object({ ok: z.boolean() });
export const sseSchema = z.string().describe('SSE: data frames {stream, data_b64}, then {event: "exit", exit_code}');
