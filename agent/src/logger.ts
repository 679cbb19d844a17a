import { pino, type Logger, type LoggerOptions } from 'pino';

/**
 * JSON lines on stdout, the same shape as the service's lines, so one log pipeline reads
 * both. The agent holds proxy credentials: those paths are blanked wherever they appear.
 * `tee` gets every line as written (redacted), for the session's own log stream
 * (logs/supervisor.ts, process "agent").
 */
export function createAgentLogger(level: string, browserId: () => string | null, tee?: (line: string) => void): Logger {
  const options = {
    level,
    base: { service: 'browserplane-agent', pid: process.pid },
    // Read per line: a standby agent has no browser (null) until it is claimed.
    mixin: () => ({ browser_id: browserId() }),
    redact: { paths: ['*.password', 'password', '*.proxy.password', '*.token'], censor: '[redacted]' },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label: string) => ({ level: label }) },
  } satisfies LoggerOptions;
  if (!tee) return pino(options);
  // pino's own default destination (stdout, written synchronously), plus the tee.
  const stdout = pino.destination({ dest: 1, sync: true });
  return pino(options, {
    write: (line: string) => {
      stdout.write(line);
      tee(line);
    },
  });
}
