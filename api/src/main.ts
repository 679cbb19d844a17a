#!/usr/bin/env node
import { applyCliArgs, packageVersion } from './cli.js';
import { ConfigError, configHelp, parseConfig } from './config.js';
import { installOutboundDispatcher } from './http/outbound.js';
import { DataDirUnreachableError } from './db/postgres-user.js';
import { createLogger } from './logger.js';
import { startService, type RunningService } from './service.js';
import { signalPolicy } from './shutdown-signals.js';

/** The composition root: configuration is parsed here and nowhere else. */
async function main(): Promise<void> {
  if (!applyCliArgs(process.argv.slice(2), { program: 'browserplane', help: configHelp, version: packageVersion })) return;
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
  const log = createLogger(config.LOG_LEVEL, undefined, config.BROWSERPLANE_LOG_FORMAT);
  installOutboundDispatcher();

  // The handlers go in before start-up: a supervisor may signal as soon as the listening
  // line is out, and a signal with no handler kills the process and leaves Postgres running.
  const state: { service?: RunningService; stopRequested?: NodeJS.Signals } = {};
  const shutdown = (running: RunningService, signal: NodeJS.Signals) => {
    running.stop(signal).then(
      () => exitWhenIdle(0),
      (error: unknown) => {
        log.error({ err: error }, 'shutdown failed');
        exitWhenIdle(1);
      },
    );
  };
  const verdictOf = signalPolicy();
  const onSignal = (signal: NodeJS.Signals) => {
    const verdict = verdictOf(signal);
    if (verdict === 'repeat') return; // the same stop delivered twice (make forwards the group's SIGTERM)
    if (verdict === 'abandon') {
      log.warn({ signal }, 'third signal during shutdown: exiting now; Postgres and browsers may be left running (the next start stops a leftover Postgres)');
      process.exit(1);
    }
    if (verdict === 'hurry') {
      log.warn({ signal }, 'second signal during shutdown: cutting open requests now and finishing the cleanup (a third signal exits at once)');
      state.service?.hurry();
      return;
    }
    state.stopRequested = signal;
    if (state.service) shutdown(state.service, signal);
    else log.info({ signal }, 'signal during start-up: stopping once started');
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);

  state.service = await startService(config, log);
  if (state.stopRequested) shutdown(state.service, state.stopRequested);
}

/**
 * Ends the process by letting the event loop empty, so pino's asynchronous writes finish
 * in order. process.exit() right after the last log line makes pino's exit hook write its
 * buffer while an earlier write is still in flight, which puts 'stopped' before 'shutting
 * down' (or drops lines). Should some handle keep the loop alive, exit anyway.
 */
function exitWhenIdle(code: number): void {
  process.exitCode = code;
  setTimeout(() => process.exit(code), 5000).unref();
}

main().catch((error: unknown) => {
  if (error instanceof DataDirUnreachableError) {
    process.stderr.write(`browserplane cannot start: ${error.message}\n`);
    process.exit(1);
  }
  process.stderr.write(`browserplane failed to start: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
