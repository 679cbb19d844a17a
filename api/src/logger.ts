import { pino, type Logger } from 'pino';
import pinoPretty from 'pino-pretty';

/**
 * Paths pino blanks out wherever they appear. Keys and secrets must never reach a log
 * line, even through a debug dump of a request.
 */
export const REDACTED_PATHS = [
  'req.headers.authorization',
  'req.headers.cookie',
  'req.headers["x-api-key"]',
  'res.headers["set-cookie"]',
  '*.key',
  '*.password',
  '*.secret',
  '*.token',
  '*.apiKey',
  'apiKey',
  'key',
  'password',
  'secret',
  'token',
];

/** BROWSERPLANE_LOG_FORMAT: JSON lines for machines, pino-pretty for a person, or pick by whether stdout is a terminal. */
export const LOG_FORMATS = ['auto', 'json', 'pretty'] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];

/** Pretty on a terminal, JSON anywhere else (a pipe, a file, a container's log). */
export function resolveLogFormat(format: LogFormat, stdoutIsTty: boolean): 'json' | 'pretty' {
  return format === 'auto' ? (stdoutIsTty ? 'pretty' : 'json') : format;
}

/**
 * The process's logger. Without a destination it writes to stdout, pretty-printed when
 * `format` says so (in process and synchronously, so the last lines before an exit are
 * not lost; redaction happens before the printer sees a line).
 */
export function createLogger(level: string, destination?: pino.DestinationStream, format: LogFormat = 'auto'): Logger {
  const pretty = destination === undefined && resolveLogFormat(format, process.stdout.isTTY === true) === 'pretty';
  return pino(
    {
      level,
      base: { service: 'browserplane' },
      redact: { paths: REDACTED_PATHS, censor: '[redacted]' },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
    },
    pretty ? pinoPretty({ colorize: true, sync: true, translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname,service' }) : destination,
  );
}
