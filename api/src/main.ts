#!/usr/bin/env node
import { ConfigError, configHelp, parseConfig } from './config.js';
import { createLogger } from './logger.js';
import { startService } from './service.js';

/** The composition root: configuration is parsed here and nowhere else. */
async function main(): Promise<void> {
  if (process.argv.includes('--help') || process.argv.includes('-h')) {
    process.stdout.write(configHelp() + '\n');
    return;
  }
  let config;
  try {
    config = parseConfig(process.env);
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(error.message + '\n');
      process.exitCode = 2;
      return;
    }
    throw error;
  }
  const log = createLogger(config.LOG_LEVEL);
  const service = await startService(config, log);

  let stopping = false;
  const onSignal = (signal: NodeJS.Signals) => {
    if (stopping) {
      log.warn({ signal }, 'second signal during shutdown: exiting now');
      process.exit(1);
    }
    stopping = true;
    service.stop(signal).then(
      () => process.exit(0),
      (error: unknown) => {
        log.error({ err: error }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
}

main().catch((error: unknown) => {
  process.stderr.write(`browserplane failed to start: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
