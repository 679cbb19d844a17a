import type { AppDeps } from '../../app-deps.js';
import { terminateGraceMs } from '../browsers/service.js';
import type { EndedBrowser } from './browsers-store.js';

/**
 * Closes pool browsers whose rows are already marked ended (so no acquire can take them),
 * and keeps the closes it runs in the background so that the manager's stop can wait for them.
 */
export class BrowserCloser {
  private readonly closing = new Set<Promise<void>>();

  constructor(private readonly deps: Pick<AppDeps, 'runtime' | 'log'>) {}

  /** Without holding up the caller: the rows already say the browsers are gone, and a graceful close takes a while. */
  closeLater(ended: EndedBrowser[]): void {
    if (ended.length === 0) return;
    const closing = this.close(ended).finally(() => this.closing.delete(closing));
    this.closing.add(closing);
  }

  /** A failure is logged: the browser has no session any more. */
  async close(ended: EndedBrowser[]): Promise<void> {
    await Promise.all(
      ended.map((b) =>
        this.deps.runtime
          .terminate(b.id, { graceMs: terminateGraceMs(b) })
          .catch((error: unknown) => this.deps.log.error({ err: error, sessionId: b.id }, 'closing a pool browser failed')),
      ),
    );
  }

  /** The background closes under way, settled. */
  async settled(): Promise<void> {
    await Promise.allSettled([...this.closing]);
  }
}
