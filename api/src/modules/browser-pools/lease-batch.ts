/**
 * Group commit for acquires. While one lease statement of a pool is in flight, the
 * acquires of that pool that arrive meanwhile wait for it and then go together, as one
 * statement and one commit that leases a browser for each (browsers-store.ts
 * leaseIdleBrowsers). Nothing is held back on purpose: a lone acquire goes at once, so one
 * client pays nothing, and ten at once pay two round trips and two WAL flushes instead of
 * ten of each (on 2 cores, ten Postgres backends waking and committing cost more than the
 * statements themselves). Durability is unchanged: no caller is answered before the commit
 * that leased its browser.
 */

/** Runs one statement for `items`: an answer per item, in order. */
export type BatchRun<Item, Answer> = (key: string, items: Item[]) => Promise<Answer[]>;

interface Entry<Item, Answer> {
  item: Item;
  resolve(answer: Answer): void;
  reject(error: unknown): void;
}

/** At most this many leases in one statement; more wait for the next. */
export const MAX_LEASE_BATCH = 64;

export class LeaseBatcher<Item, Answer> {
  /** Per key: the entries waiting for the statement in flight to end. */
  private readonly pending = new Map<string, Entry<Item, Answer>[]>();
  private readonly inFlight = new Set<string>();

  constructor(
    private readonly run: BatchRun<Item, Answer>,
    private readonly max = MAX_LEASE_BATCH,
  ) {}

  /** The answer for `item`, from a statement it shares with the other items of `key` asked for meanwhile. */
  submit(key: string, item: Item): Promise<Answer> {
    return new Promise<Answer>((resolve, reject) => {
      const entry = { item, resolve, reject };
      if (this.inFlight.has(key)) {
        const queue = this.pending.get(key);
        if (queue) queue.push(entry);
        else this.pending.set(key, [entry]);
        return;
      }
      void this.send(key, [entry]);
    });
  }

  private async send(key: string, entries: Entry<Item, Answer>[]): Promise<void> {
    this.inFlight.add(key);
    try {
      const answers = await this.run(
        key,
        entries.map((e) => e.item),
      );
      entries.forEach((e, i) => e.resolve(answers[i] as Answer));
    } catch (error) {
      for (const e of entries) e.reject(error);
    } finally {
      this.inFlight.delete(key);
      const queue = this.pending.get(key);
      if (queue) {
        const next = queue.splice(0, this.max);
        if (queue.length === 0) this.pending.delete(key);
        void this.send(key, next);
      }
    }
  }
}
