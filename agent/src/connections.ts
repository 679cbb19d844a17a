/**
 * Every client connection the agent serves that means "someone is using this browser":
 * CDP, WebDriver BiDi and live view (VNC). The service's idle timeout deletes a session
 * only when all of them have been gone for timeout_seconds, so they are counted in one
 * place and /health reports the total, the split by kind, and when the last one left.
 *
 * Each connection also says how to close it, so a reset (pool release) can end every
 * connection of the previous holder at once, and keep new ones out while it runs. New
 * ones also wait for what must happen before any client is served (the cookie baseline
 * a reset restores, read right after Chromium is ready).
 */
export type ConnectionKind = 'cdp' | 'webdriver' | 'live_view';

export interface ConnectionActivity {
  connections: number;
  byKind: Record<ConnectionKind, number>;
  /** When the last client left (or the agent started, if none ever came); null while one is connected. */
  idleSince: Date | null;
}

export class ConnectionTracker {
  private readonly open: Record<ConnectionKind, number> = { cdp: 0, webdriver: 0, live_view: 0 };
  /** One entry per open connection (objects, so two connections may share a closer). */
  private readonly closers = new Set<{ close: () => void }>();
  private idleSince = new Date();
  private holds = 0;
  private admission: Promise<void> = Promise.resolve();

  /**
   * Counts one connection; call the returned function once when it closes (extra calls are
   * ignored). `close` ends the connection (and must lead to that call). One that completes
   * its upgrade while new connections are held off (it began before) is closed at once:
   * after the current synchronous code, so its caller can finish wiring it.
   */
  opened(kind: ConnectionKind, close: () => void): () => void {
    this.open[kind] += 1;
    const entry = { close };
    this.closers.add(entry);
    if (!this.accepting()) queueMicrotask(close);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.closers.delete(entry);
      this.open[kind] -= 1;
      if (this.total() === 0) this.idleSince = new Date();
    };
  }

  /** Closes every open connection; returns how many were asked to close. */
  closeAll(): number {
    const all = [...this.closers];
    for (const { close } of all) close();
    return all.length;
  }

  /** Keeps new connections out (upgrades answer 503) until the returned function is called. */
  holdNewConnections(): () => void {
    this.holds += 1;
    let resumed = false;
    return () => {
      if (resumed) return;
      resumed = true;
      this.holds -= 1;
    };
  }

  accepting(): boolean {
    return this.holds === 0;
  }

  /** New connections wait (rather than being refused) until `ready` settles, either way. */
  admitAfter(ready: Promise<unknown>): void {
    this.admission = ready.then(
      () => undefined,
      () => undefined,
    );
  }

  /** Resolves once new connections may be served. */
  admitted(): Promise<void> {
    return this.admission;
  }

  total(): number {
    return this.open.cdp + this.open.webdriver + this.open.live_view;
  }

  activity(): ConnectionActivity {
    const total = this.total();
    return { connections: total, byKind: { ...this.open }, idleSince: total > 0 ? null : this.idleSince };
  }
}
