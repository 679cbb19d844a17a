import type { Logger } from 'pino';
import type { RunningChromium } from '../chromium.js';
import { runTool } from '../computer/x11-tools.js';
import type { XDisplay } from '../display.js';
import { withBrowserCdp, type BrowserCdp } from '../cdp/client.js';

/**
 * PATCH /browsers/{id} with a viewport, on the running browser. Headful: the Xvfb screen
 * takes the new size through RandR (x11vnc and noVNC follow it, and pages see it as
 * `screen.width`), then every Chromium window is set to fill it. Headless: the windows
 * only. Failures are thrown as messages a person can read, and a half-done change is
 * undone, so the browser keeps what it had.
 *
 * Xvfb allocates its framebuffer once, at the size it was started with, and RandR can
 * only pick a screen size inside it: a headful browser can shrink and grow back, but
 * not beyond its size at start.
 */

export interface ViewportSize {
  width: number;
  height: number;
}

export async function applyViewport(chromium: RunningChromium, viewport: ViewportSize, log: Logger): Promise<void> {
  const { display } = chromium;
  const before = display ? await resizeScreen(display, viewport) : undefined;
  try {
    await withBrowserCdp(chromium.cdp, (cdp) => resizeWindows(cdp, viewport));
  } catch (error) {
    if (display && before) await resizeScreen(display, before).catch((undo: unknown) => log.error({ err: undo }, 'could not restore the screen size'));
    throw new Error(`the browser window could not be resized to ${viewport.width}x${viewport.height}: ${error instanceof Error ? error.message : String(error)}`, {
      cause: error,
    });
  }
  log.info({ width: viewport.width, height: viewport.height, headful: Boolean(display) }, 'viewport changed');
}

interface ScreenState {
  output: string | undefined;
  width: number;
  height: number;
  maxWidth: number;
  maxHeight: number;
}

/** Resizes the X screen; returns the size it had. The display object follows, for the computer endpoints. */
async function resizeScreen(display: XDisplay, size: ViewportSize): Promise<ViewportSize> {
  const screen = parseXrandr((await runTool(display, 'xrandr', ['-q'])).stdout.toString('utf8'));
  if (size.width > screen.maxWidth || size.height > screen.maxHeight) {
    throw new Error(
      `${size.width}x${size.height} does not fit this browser's screen, which can grow to at most ` +
        `${screen.maxWidth}x${screen.maxHeight} (its size at start); create a new session for a larger viewport`,
    );
  }
  // Xvfb's only output cannot take a mode of another size, so it is switched off and the
  // screen alone carries the size; Chromium and x11vnc then use the screen's bounds.
  const outputOff = screen.output ? ['--output', screen.output, '--off'] : [];
  await runTool(display, 'xrandr', [...outputOff, '--fb', `${size.width}x${size.height}`], { timeoutMs: 10_000 });
  // Chromium rereads the screen on a RandR notify, sometimes before it has seen the new
  // root size, and then keeps the old one. A change of the root's _NET_WORKAREA (what a
  // window manager would set: the whole screen, no panels) makes it read again, after.
  await runTool(display, 'xprop', ['-root', '-f', '_NET_WORKAREA', '32c', '-set', '_NET_WORKAREA', `0, 0, ${size.width}, ${size.height}`]);
  display.width = size.width;
  display.height = size.height;
  return { width: screen.width, height: screen.height };
}

/** "Screen 0: minimum 1 x 1, current 1920 x 1080, maximum 1920 x 1080" and "screen connected ...". */
export function parseXrandr(text: string): ScreenState {
  const screen = /current (\d+) x (\d+), maximum (\d+) x (\d+)/.exec(text);
  if (!screen) throw new Error(`xrandr reported no screen size: ${text.slice(0, 200)}`);
  const [width, height, maxWidth, maxHeight] = screen.slice(1, 5).map(Number) as [number, number, number, number];
  const output = /^(\S+) connected/m.exec(text)?.[1];
  return { output, width, height, maxWidth, maxHeight };
}

interface WindowBounds {
  left?: number;
  top?: number;
  width?: number;
  height?: number;
  windowState?: 'normal' | 'minimized' | 'maximized' | 'fullscreen';
}

/** Every window with a tab: a fullscreen (kiosk) window is made normal to resize, then fullscreen again. */
async function resizeWindows(cdp: BrowserCdp, size: ViewportSize): Promise<void> {
  const { targetInfos } = await cdp.send<{ targetInfos: { targetId: string; type: string }[] }>('Target.getTargets');
  const windowIds = new Set<number>();
  for (const target of targetInfos.filter((t) => t.type === 'page')) {
    const { windowId } = await cdp.send<{ windowId: number }>('Browser.getWindowForTarget', { targetId: target.targetId });
    windowIds.add(windowId);
  }
  for (const windowId of windowIds) {
    const { bounds } = await cdp.send<{ bounds: WindowBounds }>('Browser.getWindowBounds', { windowId });
    const state = bounds.windowState ?? 'normal';
    if (state !== 'normal') await cdp.send('Browser.setWindowBounds', { windowId, bounds: { windowState: 'normal' } });
    await cdp.send('Browser.setWindowBounds', { windowId, bounds: { left: 0, top: 0, width: size.width, height: size.height } });
    if (state === 'fullscreen' || state === 'maximized') await cdp.send('Browser.setWindowBounds', { windowId, bounds: { windowState: state } });
  }
}
