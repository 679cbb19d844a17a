#!/usr/bin/env node
import { BrowserAgent, EXIT } from './agent.js';
import { parseAgentConfig, type AgentConfig } from './config.js';
import { createAgentLogger } from './logger.js';

/** The agent's composition root: configuration from the environment, nothing else. */
async function main(): Promise<void> {
  let config: AgentConfig;
  try {
    config = parseAgentConfig(process.env);
  } catch (error) {
    process.stderr.write(`invalid agent configuration: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exit(EXIT.badConfig);
  }
  const log = createAgentLogger(config.logLevel, config.spec.browserId);
  const agent = new BrowserAgent(config, log, (code) => process.exit(code));
  const onSignal = (signal: NodeJS.Signals) => void agent.shutdown(`signal ${signal}`);
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  process.on('uncaughtException', (error) => void agent.abort(error));
  process.on('unhandledRejection', (error) => void agent.abort(error));
  await agent.start().catch((error: unknown) => agent.abort(error));
}

void main();
