import { z } from 'zod';

/**
 * POST /browsers/{id}/playwright/execute (CONTRACT.md §2.4), as the SDK's
 * PlaywrightExecuteParams and PlaywrightExecuteResponse have it.
 */

/** The agent's bound too (agent/src/playwright/execute.ts, PLAYWRIGHT_LIMITS.maxTimeoutSec). */
export const PLAYWRIGHT_MAX_TIMEOUT_SEC = 300;
export const PLAYWRIGHT_DEFAULT_TIMEOUT_SEC = 60;

export const playwrightExecuteBody = z.strictObject({
  code: z
    .string()
    .min(1)
    .max(1024 * 1024)
    .describe(
      "JavaScript (or TypeScript, where the browser's agent runs Node 22.13 or later) run as the body of an async function with `page`, `context` and `browser` bound; `return` a JSON value to get it back as `result`",
    ),
  timeout_sec: z
    .number()
    .positive()
    .max(PLAYWRIGHT_MAX_TIMEOUT_SEC)
    .nullish()
    .describe(`Seconds the code may run once connected (default ${PLAYWRIGHT_DEFAULT_TIMEOUT_SEC}, at most ${PLAYWRIGHT_MAX_TIMEOUT_SEC}); then its process is killed`),
});

export const playwrightExecuteResult = z
  .object({
    success: z.boolean().describe('Whether the code ran to its end and its value could be returned'),
    result: z.unknown().optional().describe('The value the code returned, as JSON (null when it returned nothing)'),
    error: z.string().optional().describe('Why it failed: the error thrown, the syntax error, or the timeout'),
    stdout: z.string().optional().describe("The code's console output (console.log, console.info), at most 1 MiB, then a line says what was dropped"),
    stderr: z.string().optional().describe("The code's console.error and console.warn output, then a thrown error's stack; at most 1 MiB"),
  })
  .meta({ id: 'PlaywrightExecuteResponse' });
