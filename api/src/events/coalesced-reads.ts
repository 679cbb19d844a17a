/**
 * Reads shared by everyone who wants a fresh copy of the same thing at the same moment.
 *
 * A change notification reaches every event stream following one object at once; each
 * re-reading the row on its own made a thousand streams a thousand queries per change,
 * through a pool of ten connections, and on a loaded run a quarter of the streams missed
 * the final frame. Here the streams of one process share the reads of one key.
 *
 * Freshness is kept: a caller gets the result of a read that *started* after its call,
 * so it never sees a state older than the notification that woke it. At most one read
 * per key runs, and one waits behind it, shared by every caller that arrives meanwhile.
 */
const noop = () => undefined;

export class CoalescedReads<T> {
  private readonly entries = new Map<string, { running?: Promise<T>; queued?: Promise<T> }>();

  /** `read` runs for the key; callers with the same key must want the same read (put the tenant in the key). */
  fresh(key: string, read: () => Promise<T>): Promise<T> {
    let entry = this.entries.get(key);
    if (!entry) {
      entry = {};
      this.entries.set(key, entry);
    }
    if (entry.queued) return entry.queued;
    const current = entry;
    // The read starts on the next turn of the event loop (or once the running one is done):
    // the streams woken by one notification all call within the turn that delivered it.
    const before = current.running ? current.running.then(noop, noop) : new Promise<void>((resolve) => setImmediate(resolve));
    const queued = before.then(() => {
      current.queued = undefined;
      return this.start(key, current, read);
    });
    current.queued = queued;
    return queued;
  }

  /** Keys with a read running or queued (for tests: nothing is kept once reads finish). */
  get size(): number {
    return this.entries.size;
  }

  private start(key: string, entry: { running?: Promise<T>; queued?: Promise<T> }, read: () => Promise<T>): Promise<T> {
    const running = read().finally(() => {
      if (entry.running === running) entry.running = undefined;
      if (!entry.running && !entry.queued && this.entries.get(key) === entry) this.entries.delete(key);
    });
    entry.running = running;
    return running;
  }
}
