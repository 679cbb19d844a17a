import { pino, type Logger } from 'pino';

/**
 * JSON lines on stdout, the same shape as the service's lines, so one log pipeline reads
 * both. The agent holds proxy credentials: those paths are blanked wherever they appear.
 */
export function createAgentLogger(level: string, browserId: () => string | null): Logger {
  return pino({
    level,
    base: { service: 'browserplane-agent', pid: process.pid },
    // Read per line: a standby agent has no browser (null) until it is claimed.
    mixin: () => ({ browser_id: browserId() }),
    redact: { paths: ['*.password', 'password', '*.proxy.password', '*.token'], censor: '[redacted]' },
    timestamp: pino.stdTimeFunctions.isoTime,
    formatters: { level: (label) => ({ level: label }) },
  });
}
