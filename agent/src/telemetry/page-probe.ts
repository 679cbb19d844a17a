import { randomBytes } from 'node:crypto';
import type { EventedCdp } from '../curl/cdp-session.js';
import { pageScript } from './page-script.js';

/**
 * The injected page script's plumbing on one capture connection: a world and a binding
 * with random names (a page cannot guess them, and a script left in a page by an earlier
 * capture calls a binding nobody hears, never this one), installed on every page the
 * capture attaches to, re-bound at each navigation.
 */
export class PageProbe {
  readonly binding = `__bp_${randomBytes(8).toString('hex')}`;
  private readonly world = `__bpw_${randomBytes(8).toString('hex')}`;
  private readonly source: string;

  constructor(
    private readonly cdp: EventedCdp,
    options: { interaction: boolean; metrics: boolean; captcha: boolean },
  ) {
    this.source = pageScript({ binding: this.binding, ...options });
  }

  /** For documents to come (each gets the world and the script), and for the one already there. */
  async install(sessionId: string): Promise<void> {
    await this.rebind(sessionId);
    await this.cdp.send('Page.addScriptToEvaluateOnNewDocument', { source: this.source, worldName: this.world }, sessionId);
    const tree = await this.cdp.send<{ frameTree: { frame: { id: string } } }>('Page.getFrameTree', {}, sessionId);
    const world = await this.cdp.send<{ executionContextId: number }>('Page.createIsolatedWorld', { frameId: tree.frameTree.frame.id, worldName: this.world }, sessionId);
    await this.rebind(sessionId);
    await this.cdp.send('Runtime.evaluate', { expression: this.source, contextId: world.executionContextId }, sessionId);
  }

  /**
   * Adds the binding to every world of the name that exists now: without Runtime enabled,
   * Chromium does not add it to worlds created later (a new document's).
   */
  rebind(sessionId: string): Promise<unknown> {
    return this.cdp.send('Runtime.addBinding', { name: this.binding, executionContextName: this.world }, sessionId);
  }
}
