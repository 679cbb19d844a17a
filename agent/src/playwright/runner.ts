import { writeSync } from 'node:fs';
import { createRequire } from 'node:module';
import { chromium, type Browser } from 'playwright-core';
import { compileUserCode, type UserFunction } from './compile.js';
import { REPORT_FD, type RunnerJob, type RunnerMessage } from './protocol.js';

/**
 * One Playwright execution, in a process of its own (execute.ts starts it, confined by
 * spawn-runner.ts): reads the job on stdin, connects to the agent's /cdp with the
 * execution's own token, binds `page`, `context` and `browser` as Kernel's daemon does
 * (the first context and its first page, each made when there is none), runs the code
 * as the body of an async function and reports on fd 3 (protocol.ts). Console output
 * goes to this process's stdout and stderr, which the agent captures. The timeout is the
 * agent's: it kills this process's group, which no code here can prevent.
 */

function send(message: RunnerMessage): void {
  writeSync(REPORT_FD, `${JSON.stringify(message)}\n`);
}

function finish(message: RunnerMessage): never {
  send(message);
  // Pipes are written synchronously on Linux: nothing of the console output is lost.
  process.exit(0);
}

async function readJob(): Promise<RunnerJob> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin as AsyncIterable<Buffer>) chunks.push(chunk);
  return JSON.parse(Buffer.concat(chunks).toString('utf8')) as RunnerJob;
}

function failure(error: unknown): RunnerMessage {
  if (error instanceof Error) return { type: 'result', success: false, error: error.message || error.name, ...(error.stack ? { stack: error.stack } : {}) };
  return { type: 'result', success: false, error: `the code threw a value that is not an Error: ${String(error)}` };
}

/** JSON's rules (Dates become strings, functions inside objects vanish); what JSON cannot hold at all is an error. */
function resultOf(value: unknown): RunnerMessage {
  try {
    const text = JSON.stringify(value === undefined ? null : value) as string | undefined;
    return { type: 'result', success: true, result: text === undefined ? null : (JSON.parse(text) as unknown) };
  } catch (error) {
    return { type: 'result', success: false, error: `the code's return value cannot be sent as JSON: ${error instanceof Error ? error.message : String(error)}` };
  }
}

async function main(): Promise<void> {
  const job = await readJob();
  let run: UserFunction;
  try {
    run = compileUserCode(job.code);
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    finish({ type: 'result', success: false, error: `SyntaxError: ${message}` });
  }
  // What the code fires and forgets must not end the execution before it returns.
  // It goes to stderr, which is the code's console output here.
  const warn = (what: string) => (reason: unknown) => process.stderr.write(`${what}: ${reason instanceof Error ? (reason.stack ?? reason.message) : String(reason)}\n`);
  process.on('unhandledRejection', warn('Unhandled promise rejection'));
  process.on('uncaughtException', warn('Uncaught exception'));
  // For code that wants Node's modules (or playwright-core's) with require, as in a CommonJS script.
  Object.assign(globalThis, { require: createRequire(import.meta.url) });
  let browser: Browser;
  try {
    browser = await chromium.connectOverCDP(job.cdpUrl, { headers: { authorization: `Bearer ${job.cdpToken}` }, timeout: job.connectTimeoutMs });
  } catch (error) {
    finish({ type: 'result', success: false, error: `could not connect to the browser: ${error instanceof Error ? error.message : String(error)}` });
  }
  const context = browser.contexts()[0] ?? (await browser.newContext());
  const page = context.pages()[0] ?? (await context.newPage());
  // Node ends a process with nothing left to wait for (code awaiting a promise nobody can settle, its browser gone).
  process.once('beforeExit', () => finish({ type: 'result', success: false, error: 'the code never finished: its process had nothing left to wait for' }));
  send({ type: 'ready' });
  let value: unknown;
  try {
    value = await run(page, context, browser);
  } catch (error) {
    finish(failure(error));
  }
  finish(resultOf(value));
}

main().catch((error: unknown) => finish(failure(error)));
