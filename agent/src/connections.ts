/**
 * Every client connection the agent serves that means "someone is using this browser":
 * CDP, WebDriver BiDi and live view (VNC). The service's idle timeout deletes a session
 * only when all of them have been gone for timeout_seconds, so they are counted in one
 * place and /health reports the total, the split by kind, and when the last one left.
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
  private idleSince = new Date();

  /** Counts one connection; call the returned function once when it closes (extra calls are ignored). */
  opened(kind: ConnectionKind): () => void {
    this.open[kind] += 1;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.open[kind] -= 1;
      if (this.total() === 0) this.idleSince = new Date();
    };
  }

  total(): number {
    return this.open.cdp + this.open.webdriver + this.open.live_view;
  }

  activity(): ConnectionActivity {
    const total = this.total();
    return { connections: total, byKind: { ...this.open }, idleSince: total > 0 ? null : this.idleSince };
  }
}
