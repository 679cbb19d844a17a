import { describe, expect, it } from 'vitest';
import { CoalescedReads } from '../../api/src/events/coalesced-reads.js';

/** A read whose answer the test gives, so the order of events is the test's. */
function controlledSource() {
  let version = 0;
  const started: Array<{ resolve: () => void; reject: (error: Error) => void }> = [];
  const read = () =>
    new Promise<number>((resolve, reject) => {
      const seen = version;
      started.push({ resolve: () => resolve(seen), reject });
    });
  return { read, started, change: () => version++ };
}

describe('CoalescedReads', () => {
  it('serves callers arriving together with one read', async () => {
    const reads = new CoalescedReads<number>();
    const source = controlledSource();
    const answers = Promise.all([1, 2, 3].map(() => reads.fresh('k', source.read)));
    await expect.poll(() => source.started.length, { timeout: 5_000, interval: 1 }).toBeGreaterThan(0);
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(source.started).toHaveLength(1);
    source.started[0]!.resolve();
    expect(await answers).toEqual([0, 0, 0]);
    expect(reads.size).toBe(0);
  });

  it('never hands a caller a read that started before its call: it waits for one queued behind', async () => {
    const reads = new CoalescedReads<number>();
    const source = controlledSource();
    const early = reads.fresh('k', source.read);
    await expect.poll(() => source.started.length, { timeout: 5_000, interval: 1 }).toBeGreaterThan(0);
    source.change(); // the change a notification announces, after the first read began
    const late = [reads.fresh('k', source.read), reads.fresh('k', source.read)];
    expect(source.started).toHaveLength(1); // one running, one queued: not one per caller
    source.started[0]!.resolve();
    expect(await early).toBe(0);
    await expect.poll(() => source.started.length, { timeout: 5_000, interval: 1 }).toBeGreaterThan(1);
    source.started[1]!.resolve();
    expect(await Promise.all(late)).toEqual([1, 1]);
    expect(reads.size).toBe(0);
  });

  it('keeps keys apart and passes a failure to the callers of that read only', async () => {
    const reads = new CoalescedReads<number>();
    const a = controlledSource();
    const b = controlledSource();
    const fromA = reads.fresh('a', a.read);
    const fromB = reads.fresh('b', b.read);
    await expect.poll(() => a.started.length > 0 && b.started.length > 0, { timeout: 5_000, interval: 1 }).toBe(true);
    a.started[0]!.reject(new Error('database unavailable'));
    b.started[0]!.resolve();
    await expect(fromA).rejects.toThrow('database unavailable');
    expect(await fromB).toBe(0);
    // A failed read does not poison the key: the next caller reads again.
    const again = reads.fresh('a', a.read);
    await expect.poll(() => a.started.length, { timeout: 5_000, interval: 1 }).toBeGreaterThan(1);
    a.started[1]!.resolve();
    expect(await again).toBe(0);
    expect(reads.size).toBe(0);
  });
});
