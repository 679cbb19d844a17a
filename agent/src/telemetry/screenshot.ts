import type { Logger } from 'pino';
import type { TelemetryEvent } from '../../../contract/telemetry.js';
import { TELEMETRY_MAX_SCREENSHOT_BYTES } from '../../../contract/telemetry-capture.js';
import type { EventedCdp } from '../curl/cdp-session.js';

/**
 * The screenshot category: every SCREENSHOT_INTERVAL_MS, a PNG of the active page (the one
 * a client brought to the front last, Target.activateTarget or Page.bringToFront; else the
 * page attached last that is still open) as monitor_screenshot {png}. A PNG larger than
 * TELEMETRY_MAX_SCREENSHOT_BYTES (base64) is taken again at half, then a quarter of the
 * viewport's size; still larger, the event goes without it, flagged truncated. One capture
 * at a time: a tick while one is still running is skipped.
 */

export const SCREENSHOT_INTERVAL_MS = 5000;
const CAPTURE_TIMEOUT_MS = 10_000;
const SCALES = [0.5, 0.25];

type Draft = Omit<TelemetryEvent, 'ts'>;

export class ScreenshotTimer {
  private readonly timer: NodeJS.Timeout;
  private running = false;

  constructor(
    private readonly cdp: EventedCdp,
    private readonly activePage: () => string | undefined,
    private readonly emit: (event: Draft) => void,
    private readonly log: Logger,
    intervalMs = SCREENSHOT_INTERVAL_MS,
  ) {
    this.timer = setInterval(() => void this.tick(), intervalMs);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  private async tick(): Promise<void> {
    const sessionId = this.activePage();
    if (this.running || sessionId === undefined) return;
    this.running = true;
    try {
      const png = await withTimeout(this.capture(sessionId), CAPTURE_TIMEOUT_MS);
      this.emit(screenshotEvent(png));
    } catch (error) {
      // The page closed or navigated away mid-capture: the next tick takes the next one.
      this.log.debug({ err: error }, 'telemetry: a screenshot could not be taken');
    } finally {
      this.running = false;
    }
  }

  private async capture(sessionId: string): Promise<string | undefined> {
    const shot = await this.cdp.send<{ data: string }>('Page.captureScreenshot', { format: 'png' }, sessionId);
    if (shot.data.length <= TELEMETRY_MAX_SCREENSHOT_BYTES) return shot.data;
    const metrics = await this.cdp.send<{ cssVisualViewport: { pageX: number; pageY: number; clientWidth: number; clientHeight: number } }>('Page.getLayoutMetrics', {}, sessionId);
    const view = metrics.cssVisualViewport;
    for (const scale of SCALES) {
      const clip = { x: view.pageX, y: view.pageY, width: view.clientWidth, height: view.clientHeight, scale };
      const smaller = await this.cdp.send<{ data: string }>('Page.captureScreenshot', { format: 'png', clip }, sessionId);
      if (smaller.data.length <= TELEMETRY_MAX_SCREENSHOT_BYTES) return smaller.data;
    }
    return undefined;
  }
}

/** monitor_screenshot; without a PNG (too large even downscaled) it is flagged truncated. */
export function screenshotEvent(png: string | undefined): Draft {
  const source = { kind: 'cdp' as const, event: 'Page.captureScreenshot' };
  if (png === undefined) return { category: 'screenshot', type: 'monitor_screenshot', source, data: {}, truncated: true };
  return { category: 'screenshot', type: 'monitor_screenshot', source, data: { png } };
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer in ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
