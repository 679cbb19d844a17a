import { pino, type Logger } from 'pino';

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
];

export function createLogger(level: string, destination?: pino.DestinationStream): Logger {
  return pino(
    {
      level,
      base: { service: 'browserplane' },
      redact: { paths: REDACTED_PATHS, censor: '[redacted]' },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
    },
    destination,
  );
}
