import module from 'node:module';
import type { Browser, BrowserContext, Page } from 'playwright-core';

/** The caller's code as Kernel runs it: the body of `async (page, context, browser) => { ... }`. */

export type UserFunction = (page: Page, context: BrowserContext, browser: Browser) => Promise<unknown>;
type AsyncFunctionConstructor = new (...parameters: string[]) => UserFunction;

const AsyncFunction = (Object.getPrototypeOf(async () => {
  await Promise.resolve();
}) as { constructor: AsyncFunctionConstructor }).constructor;
const PARAMETERS = ['page', 'context', 'browser'];
/** Node 22.13+ and 24 strip TypeScript types (strip mode keeps every offset); Node 20 has no such API. */
const stripTypes = (module as unknown as { stripTypeScriptTypes?: (code: string, options: { mode: 'strip' }) => string }).stripTypeScriptTypes;

/**
 * JavaScript first; TypeScript (type annotations, `as`, interfaces) where the runtime can
 * strip it. The code is wrapped in a function before stripping, as Kernel does, so that
 * a top-level `return` and `await` parse, and unwrapped at the same offsets. Throws the
 * JavaScript parser's SyntaxError when neither parses.
 */
export function compileUserCode(code: string): UserFunction {
  try {
    return new AsyncFunction(...PARAMETERS, code);
  } catch (error) {
    if (!(error instanceof SyntaxError) || !stripTypes) throw error;
    const head = 'async function __browserplane__() {\n';
    const tail = '\n}';
    let stripped: string;
    try {
      stripped = stripTypes(`${head}${code}${tail}`, { mode: 'strip' });
    } catch {
      throw error;
    }
    return new AsyncFunction(...PARAMETERS, stripped.slice(head.length, stripped.length - tail.length));
  }
}
