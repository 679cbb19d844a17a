import type { Readable, Writable } from 'node:stream';
import type { CdpGrants } from './cdp-grants.js';
import { CappedOutput, readLines } from './output.js';
import type { RunnerJob, RunnerMessage } from './protocol.js';
import { REPORT_FD } from './protocol.js';
import type { Sandbox } from '../process/sandbox.js';
import { killRunner, spawnRunner, type RunnerProcess } from './spawn-runner.js';

/**
 * One Playwright execution: a fresh runner process (runner.ts) per call, never this
 * process, so nothing the code does (an endless loop, process.exit, a crash, memory)
 * touches the agent. The limits below are per execution; http.ts bounds how many run.
 */

export const PLAYWRIGHT_LIMITS = {
  /** timeout_sec when the caller gives none (the SDK's documented default). */
  defaultTimeoutSec: 60,
  /** The largest timeout_sec accepted (the API checks the same bound). */
  maxTimeoutSec: 300,
  /** From start to holding the browser (Node's start, loading playwright-core, the CDP connection): not the code's time. */
  startTimeoutMs: 30_000,
  /** Kept of each of stdout and stderr; the rest is counted and said. */
  outputBytes: 1024 * 1024,
  /** The return value, as JSON. */
  resultBytes: 8 * 1024 * 1024,
  /** V8's old space of the runner, in MiB (--max-old-space-size). */
  heapMb: 512,
  /** After the runner exits, how long the agent waits for its pipes to close. */
  drainMs: 2000,
} as const;


export interface PlaywrightExecution {
  code: string;
  timeoutSec: number;
}

/** The answer, as the SDK's PlaywrightExecuteResponse has it. */
export interface PlaywrightOutcome {
  success: boolean;
  result?: unknown;
  error?: string;
  stdout: string;
  stderr: string;
}

/** Where and as whom the code runs. */
export interface ExecutionSite {
  /** ws:// URL of this agent's /cdp as the runner reaches it. */
  cdpUrl: string;
  grants: CdpGrants;
  /** The session's process sandbox (agent/src/process/sandbox.ts): where and as whom the code runs. */
  sandbox: Sandbox;
}

type Ending = { kind: 'reported'; message: Extract<RunnerMessage, { type: 'result' }> } | { kind: 'failed'; error: string };

export async function executePlaywright(site: ExecutionSite, execution: PlaywrightExecution): Promise<PlaywrightOutcome> {
  const grant = site.grants.mint();
  const timeoutMs = Math.round(execution.timeoutSec * 1000);
  const child = spawnRunner(site.sandbox, {
    nodeArgs: [`--max-old-space-size=${PLAYWRIGHT_LIMITS.heapMb}`, '--disable-warning=ExperimentalWarning'],
    env: { NODE_ENV: 'production' },
  });
  const stdout = new CappedOutput('stdout', PLAYWRIGHT_LIMITS.outputBytes);
  const stderr = new CappedOutput('stderr', PLAYWRIGHT_LIMITS.outputBytes);
  stdout.follow(child.stdout);
  stderr.follow(child.stderr);
  // Plain listeners, not events.once: once() rejects on 'error', and nothing may reject unheard here.
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  const closed = new Promise<void>((resolve) => child.once('close', () => resolve()));
  const spawnFailed = new Promise<Error>((resolve) => child.once('error', resolve));
  const timers: NodeJS.Timeout[] = [];
  try {
    const ending = new Promise<Ending>((resolve) => {
      const fail = (error: string) => resolve({ kind: 'failed', error });
      timers.push(setTimeout(() => fail(`the execution process did not reach the browser within ${PLAYWRIGHT_LIMITS.startTimeoutMs / 1000} s`), PLAYWRIGHT_LIMITS.startTimeoutMs));
      readLines(
        child.stdio[REPORT_FD] as Readable,
        PLAYWRIGHT_LIMITS.resultBytes,
        (message) => {
          const report = message as RunnerMessage;
          if (report.type === 'ready') {
            clearTimeout(timers[0]);
            // The code's own time starts now, as in Kernel's daemon (after connecting).
            timers.push(setTimeout(() => fail(`Execution timed out after ${timeoutMs}ms`), timeoutMs));
          } else if (report.type === 'result') resolve({ kind: 'reported', message: report });
        },
        () => fail(`the code's return value is larger than ${PLAYWRIGHT_LIMITS.resultBytes} bytes of JSON`),
      );
      // 'exit' may come before the last report is read: the pipes close after it.
      void exited.then(async ({ code, signal }) => {
        await Promise.race([closed, drained()]);
        fail(`the execution process exited (${signal ? `signal ${signal}` : `code ${code}`}) before returning a result`);
      });
      void spawnFailed.then((error) => fail(`the execution process could not start: ${error.message}`));
    });
    const job: RunnerJob = { code: execution.code, cdpUrl: site.cdpUrl, cdpToken: grant.token, connectTimeoutMs: PLAYWRIGHT_LIMITS.startTimeoutMs };
    (child.stdin as Writable).on('error', () => undefined).end(JSON.stringify(job));
    const end = await ending;
    if (end.kind === 'failed') killRunner(child);
    await settle(child, exited, closed);
    return outcomeOf(end, stdout.text(), stderr.text());
  } finally {
    for (const timer of timers) clearTimeout(timer);
    grant.revoke();
    killRunner(child);
  }
}

/**
 * After a result the runner exits by itself (a failure has killed it already). Either way
 * the whole group goes (a process the code left behind, in a pod where no pid namespace
 * ends it), then the pipes get a moment to deliver the last output.
 */
async function settle(child: RunnerProcess, exited: Promise<unknown>, closed: Promise<void>): Promise<void> {
  await Promise.race([exited, drained()]);
  killRunner(child);
  await Promise.race([closed, drained()]);
  for (const stream of child.stdio) stream?.destroy();
}

const drained = () => new Promise<void>((resolve) => setTimeout(resolve, PLAYWRIGHT_LIMITS.drainMs).unref());

function outcomeOf(end: Ending, stdout: string, stderr: string): PlaywrightOutcome {
  if (end.kind === 'failed') return { success: false, error: end.error, stdout, stderr };
  const { message } = end;
  if (message.success) return { success: true, result: message.result, stdout, stderr };
  // Kernel sends the stack as stderr; here it follows what the code wrote there.
  const stack = message.stack ? `${stderr && !stderr.endsWith('\n') ? '\n' : ''}${message.stack}\n` : '';
  return { success: false, error: message.error, stdout, stderr: `${stderr}${stack}` };
}
