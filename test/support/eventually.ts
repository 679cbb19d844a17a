/**
 * Polls until a wait is over, for waits whose value the test needs afterwards (expect.poll
 * asserts but hands nothing back). With a plain probe, "not yet" is undefined, null,
 * false or '', so a probe can end in `cond && value` (a string it reads may be empty
 * while it is not there yet, as a released Lease's holder is); 0 is a value. With `accept`, the
 * probe's value is done when accept says so (whatever it is) and a timeout shows the value
 * last read. A probe that throws fails the wait at once unless `retryErrors`: then the error
 * counts as "not yet" and a timeout names the last one.
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

type NotYet = undefined | null | false | '';

export function eventually<T>(read: () => T | Promise<T>, options: EventuallyOptions & { accept: (value: T) => boolean }): Promise<T>;
export function eventually<T>(probe: () => T | NotYet | Promise<T | NotYet>, options: EventuallyOptions): Promise<T>;
export async function eventually<T>(probe: () => unknown, options: EventuallyOptions & { accept?: (value: T) => boolean }): Promise<T> {
  const done = options.accept ?? ((value: unknown) => value !== undefined && value !== null && value !== false && value !== '');
  const deadline = Date.now() + options.timeoutMs;
  let lastError: unknown;
  let last: { value: unknown } | undefined;
  for (;;) {
    try {
      const value = await probe();
      if (done(value as T)) return value as T;
      last = { value };
    } catch (error) {
      if (!options.retryErrors) throw error;
      lastError = error;
    }
    if (Date.now() > deadline) {
      const seen = options.accept && last ? `; still ${JSON.stringify(last.value)}` : '';
      const failed = lastError === undefined ? '' : ` (last error: ${lastError instanceof Error ? lastError.message : JSON.stringify(lastError)})`;
      const detail = options.detail ? `; ${await options.detail()}` : '';
      throw new Error(`${options.what ?? 'condition'} not within ${options.timeoutMs} ms${failed}${seen}${detail}`);
    }
    await new Promise((resolve) => setTimeout(resolve, options.intervalMs));
  }
}
