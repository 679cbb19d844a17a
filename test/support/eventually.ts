/**
 * Polls `probe` until it gives a value, for waits whose value the test needs afterwards
 * (expect.poll asserts but hands nothing back). "Not yet" is undefined, null or false, so a
 * probe can end in `cond && value`; 0 and '' are values. A probe that throws fails the wait
 * at once unless `retryErrors`: then the error counts as "not yet" and the timeout names the
 * last one.
 */
export interface EventuallyOptions {
  timeoutMs: number;
  intervalMs: number;
  /** What the wait is for, in the timeout's message. */
  what?: string;
  retryErrors?: boolean;
  /** More for the timeout's message: what was last seen, a log tail. */
  detail?: () => string | Promise<string>;
}

export async function eventually<T>(probe: () => T | undefined | null | false | Promise<T | undefined | null | false>, options: EventuallyOptions): Promise<T> {
  const deadline = Date.now() + options.timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const value = await probe();
      if (value !== undefined && value !== null && value !== false) return value;
    } catch (error) {
      if (!options.retryErrors) throw error;
      lastError = error;
    }
    if (Date.now() > deadline) {
      const last = lastError === undefined ? '' : ` (last error: ${lastError instanceof Error ? lastError.message : JSON.stringify(lastError)})`;
      const detail = options.detail ? `; ${await options.detail()}` : '';
      throw new Error(`${options.what ?? 'condition'} not within ${options.timeoutMs} ms${last}${detail}`);
    }
    await new Promise((resolve) => setTimeout(resolve, options.intervalMs));
  }
}
