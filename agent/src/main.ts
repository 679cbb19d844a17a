#!/usr/bin/env node
import type { BrowserAgent } from './agent.js';
import { isStandby, parseAgentConfig, parseStandbyConfig, parseStandbyToken, type AgentConfig, type StandbyConfig } from './config.js';
import { createAgentLogger } from './logger.js';
import { supervisorLogs } from './logs/supervisor.js';

/** Exit codes the runtime reads (the same as agent.ts's EXIT, without loading it here). */
const BAD_CONFIG = 2;
const START_FAILED = 1;

/**
 * The agent's composition root: configuration from the environment, nothing else. With
 * AGENT_SPEC it starts its browser at once; with AGENT_STANDBY=1 it waits to be claimed
 * (standby.ts).
 */
async function main(): Promise<void> {
  let config: AgentConfig | StandbyConfig;
  let standbyToken = '';
  const standby = isStandby(process.env);
  try {
    config = standby ? parseStandbyConfig(process.env) : await parseAgentConfig(process.env);
    if (standby) standbyToken = parseStandbyToken(process.env);
  } catch (error) {
    process.stderr.write(`invalid agent configuration: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exit(BAD_CONFIG);
  }
  // Read once: no child (Chromium, Xvfb, x11vnc) inherits them by accident.
  forgetSecrets();
  let browserId: string | null = standby ? null : (config as AgentConfig).spec.browserId;
  supervisorLogs.configure(config.logLimits);
  const log = createAgentLogger(config.logLevel, () => browserId, (line) => supervisorLogs.feed('agent', line));
  let agent: BrowserAgent | undefined;
  const exit = (code: number) => process.exit(code);
  const onSignal = (signal: NodeJS.Signals) => (agent ? void agent.shutdown(`signal ${signal}`) : exit(0));
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  process.on('uncaughtException', (error) => (agent ? void agent.abort(error) : fatal(error)));
  process.on('unhandledRejection', (error) => (agent ? void agent.abort(error) : fatal(error)));
  const fatal = (error: unknown) => {
    log.error({ err: error }, 'standby agent failed');
    exit(START_FAILED);
  };

  if (standby) {
    const { runStandby } = await import('./standby.js');
    agent = (
      await runStandby(config, standbyToken, log, (id) => (browserId = id), exit).catch((error: unknown) => {
        fatal(error);
        throw error;
      })
    ).agent;
    return;
  }
  const { BrowserAgent } = await import('./agent.js');
  agent = new BrowserAgent(config as AgentConfig, log, exit);
  await agent.start().catch((error: unknown) => agent.abort(error));
}

function forgetSecrets(): void {
  delete process.env.AGENT_TOKEN;
  delete process.env.AGENT_STANDBY_TOKEN;
}

void main();
