/**
 * What the agent and its Playwright runner (runner.ts, a child process of its own) say to
 * each other. The agent writes one job as a JSON line on the runner's stdin; the runner
 * writes JSON lines on fd 3 (its stdout and stderr are the code's console output, and the
 * code could write anything there): `ready` once it holds the browser, then one `result`.
 * The code runs in that process and may write on fd 3 too; it can only forge its own
 * result, which the agent bounds like any other (REPORT_MAX_BYTES).
 */

/** The runner's side channel: stdio 0-2 are stdin, stdout and stderr. */
export const REPORT_FD = 3;

export interface RunnerJob {
  /** The body of `async (page, context, browser) => { ... }`. */
  code: string;
  /** ws:// URL of this agent's /cdp. */
  cdpUrl: string;
  /** An execution's own CDP token (cdp-grants.ts), never the agent token. */
  cdpToken: string;
  connectTimeoutMs: number;
}

export type RunnerMessage =
  | { type: 'ready' }
  | { type: 'result'; success: true; result: unknown }
  | { type: 'result'; success: false; error: string; stack?: string };
