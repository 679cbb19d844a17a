import type { Logger } from 'pino';
import type { CdpMux } from '../cdp/mux.js';
import { openEventedCdp, type CdpEvent, type EventedCdp } from '../curl/cdp-session.js';
import * as map from './cdp-events.js';
import type { TelemetrySink } from './sink.js';

/**
 * The agent's own CDP connection for telemetry (a virtual connection on the pipe, so no
 * client sees it and it keeps no session from its idle timeout). It discovers targets
 * (page_tab_opened) and auto-attaches to every page, where it enables only the domains of
 * the enabled categories: Runtime for console (a page can notice Runtime.enable, so it is
 * never enabled for a session that does not capture console), Network for network, Page
 * for page. Network idle is 500 ms with no request in flight after one was.
 */

const NETWORK_IDLE_MS = 500;
const CDP_CATEGORIES = ['console', 'network', 'page'] as const;

interface Target {
  ctx: map.TargetContext;
  inflight: Map<string, string>;
  idleTimer?: NodeJS.Timeout;
  sawRequest: boolean;
}

export class CdpCapture {
  private readonly targets = new Map<string, Target>();
  private closed = false;

  private constructor(
    private readonly cdp: EventedCdp,
    private readonly sink: TelemetrySink,
    private readonly domains: ReadonlySet<string>,
    private readonly log: Logger,
  ) {}

  /** Categories the capture needs CDP for; none: no connection at all. */
  static needed(enabled: (category: 'console' | 'network' | 'page') => boolean): Set<string> {
    return new Set(CDP_CATEGORIES.filter(enabled));
  }

  static async start(mux: CdpMux, sink: TelemetrySink, domains: ReadonlySet<string>, log: Logger): Promise<CdpCapture> {
    const capture = new CdpCapture(await openEventedCdp(mux), sink, domains, log);
    capture.cdp.onEvent((event) => capture.onEvent(event));
    if (domains.has('page')) await capture.cdp.send('Target.setDiscoverTargets', { discover: true, filter: [{ type: 'page' }] });
    await capture.cdp.send('Target.setAutoAttach', { autoAttach: true, waitForDebuggerOnStart: false, flatten: true, filter: [{ type: 'page' }] });
    return capture;
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    for (const target of this.targets.values()) clearTimeout(target.idleTimer);
    this.targets.clear();
    this.cdp.close(new Error('telemetry capture closed'));
  }

  private onEvent(event: CdpEvent): void {
    if (this.closed) return;
    try {
      if (event.sessionId === undefined) this.onBrowserEvent(event);
      else this.onTargetEvent(this.targets.get(event.sessionId), event);
    } catch (error) {
      this.log.warn({ err: error, method: event.method }, 'telemetry: a CDP event could not be mapped');
    }
  }

  private onBrowserEvent({ method, params }: CdpEvent): void {
    if (method === 'Target.targetCreated') {
      const info = params.targetInfo as { targetId?: string; type?: string; url?: string; title?: string; openerId?: string };
      if (info.type === 'page') this.sink.emit(map.tabOpenedEvent(info));
    } else if (method === 'Target.attachedToTarget') {
      const info = params.targetInfo as { targetId: string; type?: string; url?: string };
      const sessionId = params.sessionId as string;
      const ctx: map.TargetContext = { session_id: sessionId, target_id: info.targetId, target_type: map.targetType(info.type), url: info.url, nav_seq: 0 };
      this.targets.set(sessionId, { ctx, inflight: new Map(), sawRequest: false });
      void this.enableDomains(sessionId);
    } else if (method === 'Target.detachedFromTarget') {
      const target = this.targets.get(params.sessionId as string);
      if (target) clearTimeout(target.idleTimer);
      this.targets.delete(params.sessionId as string);
    }
  }

  private async enableDomains(sessionId: string): Promise<void> {
    const send = (method: string) => this.cdp.send(method, {}, sessionId);
    try {
      await Promise.all([
        this.domains.has('page') ? send('Page.enable') : undefined,
        this.domains.has('network') ? send('Network.enable') : undefined,
        this.domains.has('console') ? send('Runtime.enable') : undefined,
      ]);
    } catch (error) {
      // The page closed while we attached: nothing to capture there.
      if (!this.closed) this.log.debug({ err: error }, 'telemetry: enabling CDP domains on a page failed');
    }
  }

  private onTargetEvent(target: Target | undefined, { method, params }: CdpEvent): void {
    if (!target) return;
    const { ctx } = target;
    switch (method) {
      case 'Runtime.consoleAPICalled':
        return this.sink.emit(map.consoleEvent(params, ctx));
      case 'Runtime.exceptionThrown':
        return this.sink.emit(map.exceptionEvent(params, ctx));
      case 'Network.requestWillBeSent':
        target.inflight.set(params.requestId as string, (params.request as { method?: string } | undefined)?.method ?? 'GET');
        target.sawRequest = true;
        clearTimeout(target.idleTimer);
        return this.sink.emit(map.requestEvent(params, ctx));
      case 'Network.responseReceived':
        return this.sink.emit(map.responseEvent(params, ctx, target.inflight.get(params.requestId as string)));
      case 'Network.loadingFailed':
        this.settle(target, params.requestId as string);
        return this.sink.emit(map.loadingFailedEvent(params, ctx));
      case 'Network.loadingFinished':
        return this.settle(target, params.requestId as string);
      case 'Page.frameNavigated': {
        const frame = params.frame as { parentId?: string; url?: string };
        if (frame.parentId === undefined) {
          ctx.nav_seq += 1;
          if (frame.url !== undefined) ctx.url = frame.url;
        }
        return this.sink.emit(map.navigationEvent(params, ctx));
      }
      case 'Page.domContentEventFired':
        return this.sink.emit(map.lifecycleEvent('dom', params, ctx));
      case 'Page.loadEventFired':
        return this.sink.emit(map.lifecycleEvent('load', params, ctx));
    }
  }

  private settle(target: Target, requestId: string): void {
    target.inflight.delete(requestId);
    if (target.inflight.size > 0 || !target.sawRequest) return;
    clearTimeout(target.idleTimer);
    target.idleTimer = setTimeout(() => {
      if (target.inflight.size > 0 || this.closed) return;
      target.sawRequest = false;
      this.sink.emit(map.networkIdleEvent(target.ctx));
    }, NETWORK_IDLE_MS);
    target.idleTimer.unref();
  }
}
