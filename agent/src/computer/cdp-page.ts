import type { BrowserCdp } from '../cdp/client.js';
import type { ScreenSize } from './checks.js';
import { ComputerError } from './x11-tools.js';

/**
 * Which page a headless browser's computer acts on, and where that page sits on its
 * "screen".
 *
 * The page is the one a user would be looking at: the most recently activated page
 * target, where activated means what the agent can see from one operation to the next: a
 * page whose document became visible (a new foreground tab or popup, a tab switch by
 * Target.activateTarget or Page.bringToFront), ranked after the pages seen visible
 * before it; when it closes, the one activated before it. Pages that became visible
 * together rank in the order Chromium lists them, later first; with no visible page, the
 * most recently shown one is used.
 *
 * Not seen: a tab switch among pages a client keeps visible. CDP clients that emulate
 * focus on their pages (Playwright does on every page it attaches to) keep each of them
 * visible, so a switch changes nothing a page shows; for them the newest page opened is
 * the one acted on until it closes. Chromium's CDP tells nobody which tab of a window is
 * active (Target.getTargets has no such field, and lists pages in no such order).
 *
 * The screen is the page's window: Chromium 156 lays out a headless window as it does a
 * headful one (tab strip and toolbar above the page; measured for a 1024x768 session: the
 * page's (0, 0) is the screen's (0, 87) in both modes), so headless coordinates are window
 * coordinates and mean the same point of the page as the headful X screen's, whose window
 * sits at (0, 0) and fills it. The page's top is the window's height less the page's; the
 * browser chrome takes no width.
 *
 * Each page is read in an isolated world, which the page's own scripts cannot reach,
 * so a background page cannot make itself look visible to capture input meant for
 * another.
 */

export interface PageView {
  targetId: string;
  sessionId: string;
  browserContextId: string | undefined;
  screen: ScreenSize;
  /** Where the page's (0, 0) is on the screen. */
  offset: { x: number; y: number };
  /** The page's viewport in CSS pixels. */
  viewport: ScreenSize;
  /** An execution context of the agent's isolated world in the page's main frame. */
  contextId: number;
  origin: string;
  secureContext: boolean;
}

interface Probe {
  visible: boolean;
  innerWidth: number;
  innerHeight: number;
  outerHeight: number;
  origin: string;
  secure: boolean;
}

interface Candidate {
  targetId: string;
  browserContextId: string | undefined;
  sessionId: string;
  contextId: number;
  probe: Probe;
}

const WORLD_NAME = 'browserplane-computer';
/** A page busy in a script loop cannot stall every operation: it is passed over. */
const PROBE_TIMEOUT_MS = 3000;
const PROBE =
  '({ visible: document.visibilityState === "visible", innerWidth, innerHeight, outerHeight, origin: location.origin, secure: isSecureContext })';

export class ActivePage {
  private shownAt = new Map<string, number>();
  private visibleBefore = new Set<string>();
  private clock = 0;

  /** Attaches to the page the computer acts on (the connection's close detaches it). */
  async open(cdp: BrowserCdp): Promise<PageView> {
    const { targetInfos } = await cdp.send<{ targetInfos: { targetId: string; type: string; browserContextId?: string }[] }>('Target.getTargets');
    const pages = targetInfos.filter((info) => info.type === 'page');
    const probed = await Promise.all(pages.map((page) => probe(cdp, page.targetId, page.browserContextId)));
    const candidates = probed.filter((candidate): candidate is Candidate => candidate !== undefined);
    const chosen = this.choose(candidates);
    if (!chosen) throw new ComputerError(409, 'no_page', 'the browser has no page open to act on');
    await cdp.send('Emulation.setFocusEmulationEnabled', { enabled: true }, chosen.sessionId);
    const { windowId } = await cdp.send<{ windowId: number }>('Browser.getWindowForTarget', { targetId: chosen.targetId });
    const { bounds } = await cdp.send<{ bounds: { width?: number; height?: number } }>('Browser.getWindowBounds', { windowId });
    const { probe: seen } = chosen;
    const screen = { width: bounds.width ?? seen.innerWidth, height: bounds.height ?? seen.outerHeight };
    return {
      targetId: chosen.targetId,
      sessionId: chosen.sessionId,
      browserContextId: chosen.browserContextId,
      screen,
      offset: { x: 0, y: Math.max(0, seen.outerHeight - seen.innerHeight) },
      viewport: { width: seen.innerWidth, height: seen.innerHeight },
      contextId: chosen.contextId,
      origin: seen.origin,
      secureContext: seen.secure,
    };
  }

  private choose(candidates: Candidate[]): Candidate | undefined {
    const visibleNow = new Set(candidates.filter((candidate) => candidate.probe.visible).map((candidate) => candidate.targetId));
    for (const targetId of visibleNow) if (!this.visibleBefore.has(targetId)) this.shownAt.set(targetId, ++this.clock);
    const present = new Set(candidates.map((candidate) => candidate.targetId));
    for (const targetId of this.shownAt.keys()) if (!present.has(targetId)) this.shownAt.delete(targetId);
    this.visibleBefore = visibleNow;
    const rank = (candidate: Candidate) => (candidate.probe.visible ? 1e12 : 0) + (this.shownAt.get(candidate.targetId) ?? 0);
    let best: Candidate | undefined;
    for (const candidate of candidates) if (!best || rank(candidate) >= rank(best)) best = candidate;
    return best;
  }
}

/** Undefined for a page that went away or did not answer in time. */
async function probe(cdp: BrowserCdp, targetId: string, browserContextId: string | undefined): Promise<Candidate | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<undefined>((resolve) => (timer = setTimeout(resolve, PROBE_TIMEOUT_MS, undefined)));
  const read = (async (): Promise<Candidate> => {
    const { sessionId } = await cdp.send<{ sessionId: string }>('Target.attachToTarget', { targetId, flatten: true });
    const { executionContextId: contextId } = await cdp.send<{ executionContextId: number }>('Page.createIsolatedWorld', { frameId: targetId, worldName: WORLD_NAME }, sessionId);
    const answer = await cdp.send<{ result: { value?: Probe } }>('Runtime.evaluate', { expression: PROBE, contextId, returnByValue: true }, sessionId);
    if (!answer.result.value) throw new Error('the page gave no answer');
    return { targetId, browserContextId, sessionId, contextId, probe: answer.result.value };
  })();
  try {
    return await Promise.race([read.catch(() => undefined), timeout]);
  } finally {
    clearTimeout(timer);
  }
}
