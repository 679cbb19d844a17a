import type { Logger } from 'pino';
import type { CdpMux } from '../cdp/mux.js';
import { openEventedCdp, type CdpEvent, type EventedCdp } from '../curl/cdp-session.js';
import { OpenChallenges } from './captcha-events.js';
import * as map from './cdp-events.js';
import { navigationSettledEvent, pageMessageEvent, parseMessage } from './page-events.js';
import { PageProbe } from './page-probe.js';
import { ScreenshotTimer } from './screenshot.js';
import type { TelemetrySink } from './sink.js';

/**
 * The agent's own CDP connection for telemetry (a virtual connection on the pipe, so no
 * client sees it and it keeps no session from its idle timeout). It discovers targets
 * (page_tab_opened) and auto-attaches to every page, where it enables only the domains of
 * the enabled categories: Runtime for console (a page can notice Runtime.enable, so it is
 * never enabled for a session that does not capture console), Network for network, Page
 * for page (and Network too, for page_navigation_settled). Interaction, the page metrics
 * and captcha outcomes come from a script in an isolated world (page-probe.ts; Page is
 * enabled for it, to re-bind at each navigation), screenshots from a timer
 * (screenshot.ts); neither exists unless its category is on. Network idle is 500 ms with
 * no request in flight after one was; a navigation is settled once the page loaded, the
 * network is idle and the layout settled.
 */

const NETWORK_IDLE_MS = 500;
const CDP_CATEGORIES = ['console', 'network', 'page', 'interaction', 'screenshot', 'captcha'] as const;
export type CdpCategory = (typeof CDP_CATEGORIES)[number];

/** A step of the start that failed (monitor_init_failed's `step`). */
export class CaptureStartError extends Error {
  constructor(
    readonly step: string,
    cause: unknown,
  ) {
    super(`telemetry capture: ${step} failed`, { cause });
  }
}

async function step<T>(name: string, run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (error) {
    throw new CaptureStartError(name, error);
  }
}

interface Target {
  ctx: map.TargetContext;
  inflight: Map<string, string>;
  idleTimer?: NodeJS.Timeout;
  sawRequest: boolean;
  /** Of the current navigation: page_navigation_settled waits for all three. */
  loaded: boolean;
  layoutSettled: boolean;
  navigationSettled: boolean;
  captchas: OpenChallenges;
}

export class CdpCapture {
  private readonly targets = new Map<string, Target>();
  private readonly probe?: PageProbe;
  private screenshots?: ScreenshotTimer;
  private closed = false;

  private constructor(
    private readonly cdp: EventedCdp,
    private readonly sink: TelemetrySink,
    private readonly domains: ReadonlySet<string>,
    private readonly log: Logger,
    /** The page a client brought to the front last (CdpMux.frontTarget). */
    private readonly front: () => string | undefined = () => undefined,
  ) {
    const interaction = domains.has('interaction');
    const metrics = domains.has('page');
    const captcha = domains.has('captcha');
    if (interaction || metrics || captcha) this.probe = new PageProbe(cdp, { interaction, metrics, captcha });
  }

  /** Categories the capture needs CDP for; none: no connection at all. */
  static needed(enabled: (category: CdpCategory) => boolean): Set<string> {
    return new Set(CDP_CATEGORIES.filter(enabled));
  }

  /** Fails with a CaptureStartError naming the step. */
  static async start(mux: CdpMux, sink: TelemetrySink, domains: ReadonlySet<string>, log: Logger): Promise<CdpCapture> {
    const capture = new CdpCapture(await step('connect', () => openEventedCdp(mux)), sink, domains, log, () => mux.frontTarget());
    try {
      capture.cdp.onEvent((event) => capture.onEvent(event));
      const send = (method: string, params: Record<string, unknown>) => step(method, () => capture.cdp.send(method, params));
      if (domains.has('page')) await send('Target.setDiscoverTargets', { discover: true, filter: [{ type: 'page' }] });
      await send('Target.setAutoAttach', { autoAttach: true, waitForDebuggerOnStart: false, flatten: true, filter: [{ type: 'page' }] });
      if (domains.has('screenshot')) capture.screenshots = new ScreenshotTimer(capture.cdp, () => capture.activePage(), (event) => sink.emit(event), log);
      return capture;
    } catch (error) {
      capture.close();
      throw error;
    }
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.screenshots?.stop();
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
      this.targets.set(sessionId, { ctx, inflight: new Map(), sawRequest: false, loaded: false, layoutSettled: false, navigationSettled: false, captchas: new OpenChallenges() });
      void this.enableDomains(sessionId);
    } else if (method === 'Target.detachedFromTarget') {
      const target = this.targets.get(params.sessionId as string);
      if (target) clearTimeout(target.idleTimer);
      if (target) this.emitAll(target.captchas.abandonAll(target.ctx, Date.now()));
      this.targets.delete(params.sessionId as string);
    }
  }

  private async enableDomains(sessionId: string): Promise<void> {
    const send = (method: string) => this.cdp.send(method, {}, sessionId);
    const has = (category: CdpCategory) => this.domains.has(category);
    try {
      await Promise.all([
        has('page') || has('interaction') || has('captcha') ? send('Page.enable') : undefined,
        has('network') || has('page') ? send('Network.enable') : undefined,
        has('console') ? send('Runtime.enable') : undefined,
        this.probe?.install(sessionId),
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
        void this.probe?.rebind(target.ctx.session_id).catch(() => undefined);
        if (frame.parentId === undefined) {
          this.emitAll(target.captchas.abandonAll(ctx, Date.now()));
          ctx.nav_seq += 1;
          if (frame.url !== undefined) ctx.url = frame.url;
          Object.assign(target, { loaded: false, layoutSettled: false, navigationSettled: false });
        }
        return this.sink.emit(map.navigationEvent(params, ctx));
      }
      case 'Page.domContentEventFired':
        void this.probe?.rebind(target.ctx.session_id).catch(() => undefined);
        return this.sink.emit(map.lifecycleEvent('dom', params, ctx));
      case 'Page.loadEventFired':
        target.loaded = true;
        return this.sink.emit(map.lifecycleEvent('load', params, ctx));
      case 'Runtime.bindingCalled':
        return this.onPageMessage(target, params);
    }
  }

  private onPageMessage(target: Target, params: Record<string, unknown>): void {
    if (params.name !== this.probe?.binding) return;
    const message = parseMessage(params.payload);
    if (message?.t === 'captcha_open') return target.captchas.announce(message, Date.now());
    const event = message && (message.t === 'captcha' ? target.captchas.finish(message, target.ctx) : pageMessageEvent(message, target.ctx));
    if (!event) return;
    this.sink.emit(event);
    if (event.type === 'page_layout_settled') {
      target.layoutSettled = true;
      this.maybeNavigationSettled(target);
    }
  }

  private maybeNavigationSettled(target: Target): void {
    const networkIdle = target.inflight.size === 0 && !target.sawRequest;
    if (target.navigationSettled || !target.loaded || !target.layoutSettled || !networkIdle) return;
    target.navigationSettled = true;
    this.sink.emit(navigationSettledEvent(target.ctx));
  }

  private emitAll(events: Parameters<TelemetrySink['emit']>[0][]): void {
    for (const event of events) this.sink.emit(event);
  }

  /** The page to screenshot: the one a client brought to the front last, else the one attached last that is still open. */
  private activePage(): string | undefined {
    const front = this.front();
    for (const [sessionId, target] of this.targets) if (front !== undefined && target.ctx.target_id === front) return sessionId;
    return [...this.targets.keys()].at(-1);
  }

  private settle(target: Target, requestId: string): void {
    target.inflight.delete(requestId);
    if (target.inflight.size > 0 || !target.sawRequest) return;
    clearTimeout(target.idleTimer);
    target.idleTimer = setTimeout(() => {
      if (target.inflight.size > 0 || this.closed) return;
      target.sawRequest = false;
      this.sink.emit(map.networkIdleEvent(target.ctx));
      this.maybeNavigationSettled(target);
    }, NETWORK_IDLE_MS);
    target.idleTimer.unref();
  }
}
