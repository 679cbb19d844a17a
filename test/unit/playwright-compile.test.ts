import module from 'node:module';
import { describe, expect, it } from 'vitest';
import { compileUserCode } from '../../agent/src/playwright/compile.js';

/** How the caller's code becomes the function the runner calls (agent/src/playwright/compile.ts); no browser needed. */

const call = (code: string, page: unknown = {}) => compileUserCode(code)(page as never, {} as never, {} as never);

describe('the caller\'s code', () => {
  it('is the body of an async function of page, context and browser: return and await work at the top', async () => {
    expect(await call('return await Promise.resolve(page.answer);', { answer: 42 })).toBe(42);
    expect(await call('const x = 1;')).toBeUndefined();
    expect(await call('return [typeof page, typeof context, typeof browser];')).toEqual(['object', 'object', 'object']);
  });

  it('that does not parse throws a SyntaxError before anything runs', () => {
    expect(() => compileUserCode('globalThis.ran = true; return (;')).toThrow(SyntaxError);
    expect((globalThis as { ran?: boolean }).ran).toBeUndefined();
  });

  const strips = typeof (module as unknown as { stripTypeScriptTypes?: unknown }).stripTypeScriptTypes === 'function';
  it.runIf(strips)('may be TypeScript where Node strips types (22.13 and later)', async () => {
    expect(await call('interface Point { x: number }\nconst p: Point = { x: page.n as number };\nreturn p.x + 1;', { n: 1 })).toBe(2);
  });

  it.skipIf(strips)('is JavaScript only where Node cannot strip types (Node 20)', () => {
    expect(() => compileUserCode('const p: number = 1; return p;')).toThrow(SyntaxError);
  });
});
