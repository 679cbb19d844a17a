import { describe, expect, it } from 'vitest';
import { LeaseBatcher } from '../../api/src/modules/browser-pools/lease-batch.js';

/** A statement per call whose end the test decides; each item's answer is `item * 10`. */
function controlledRun() {
  const calls: Array<{ key: string; items: number[]; finish: () => void; fail: (error: Error) => void }> = [];
  const run = (key: string, items: number[]) =>
    new Promise<number[]>((resolve, reject) => {
      calls.push({ key, items, finish: () => resolve(items.map((i) => i * 10)), fail: reject });
    });
  return { run, calls };
}

const tick = () => new Promise((resolve) => setImmediate(resolve));

describe('LeaseBatcher', () => {
  it('sends a lone item at once, on its own', async () => {
    const { run, calls } = controlledRun();
    const batcher = new LeaseBatcher(run);
    const answer = batcher.submit('pool', 1);
    expect(calls.map((c) => c.items)).toEqual([[1]]);
    calls[0]!.finish();
    expect(await answer).toBe(10);
  });

  it('coalesces the items that arrive while a statement is in flight into the next one, answering each its own', async () => {
    const { run, calls } = controlledRun();
    const batcher = new LeaseBatcher(run);
    const first = batcher.submit('pool', 1);
    const rest = [2, 3, 4, 5].map((i) => batcher.submit('pool', i));
    expect(calls).toHaveLength(1);
    calls[0]!.finish();
    expect(await first).toBe(10);
    await tick();
    expect(calls.map((c) => c.items)).toEqual([[1], [2, 3, 4, 5]]);
    calls[1]!.finish();
    expect(await Promise.all(rest)).toEqual([20, 30, 40, 50]);
  });

  it('keeps keys apart: another pool’s items never wait for this one’s statement', async () => {
    const { run, calls } = controlledRun();
    const batcher = new LeaseBatcher(run);
    void batcher.submit('a', 1);
    const b = batcher.submit('b', 2);
    expect(calls.map((c) => [c.key, c.items])).toEqual([
      ['a', [1]],
      ['b', [2]],
    ]);
    calls[1]!.finish();
    expect(await b).toBe(20);
  });

  it('caps a statement at max items; the rest go in the one after', async () => {
    const { run, calls } = controlledRun();
    const batcher = new LeaseBatcher(run, 2);
    const all = [1, 2, 3, 4].map((i) => batcher.submit('pool', i));
    calls[0]!.finish();
    await tick();
    expect(calls.map((c) => c.items)).toEqual([[1], [2, 3]]);
    calls[1]!.finish();
    await tick();
    expect(calls.map((c) => c.items)).toEqual([[1], [2, 3], [4]]);
    calls[2]!.finish();
    expect(await Promise.all(all)).toEqual([10, 20, 30, 40]);
  });

  it('fails every item of a failed statement, and carries on with the next', async () => {
    const { run, calls } = controlledRun();
    const batcher = new LeaseBatcher(run);
    const first = batcher.submit('pool', 1);
    const second = [2, 3].map((i) => batcher.submit('pool', i));
    const third = batcher.submit('pool', 4);
    calls[0]!.finish();
    await first;
    await tick();
    // 2, 3 and 4 all arrived during the first statement: they share the second.
    expect(calls[1]!.items).toEqual([2, 3, 4]);
    calls[1]!.fail(new Error('database gone'));
    await expect(Promise.all(second)).rejects.toThrow('database gone');
    await expect(third).rejects.toThrow('database gone');
    const later = batcher.submit('pool', 5);
    expect(calls.map((c) => c.items)).toEqual([[1], [2, 3, 4], [5]]);
    calls[2]!.finish();
    expect(await later).toBe(50);
  });
});
