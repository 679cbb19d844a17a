import type { Writable } from 'node:stream';
import type { Logger } from 'pino';
import type { CdpMux } from '../cdp/mux.js';
import { openEventedCdp, type CdpEvent, type EventedCdp } from '../curl/cdp-session.js';

/**
 * A headless browser has no display to grab: the recording is made of CDP screencast frames
 * of its page (Page.startScreencast on the agent's own connection). Chromium sends a frame
 * only when the page changes, so a pacer writes the latest frame to ffmpeg once per tick of
 * the wall clock: a still page still yields a video as long as the recording, at the asked
 * frame rate. When the recorded tab closes, the recording moves to another open tab.
 */

interface TargetInfo {
  targetId: string;
  type: string;
}

export class ScreencastFeed {
  private latest?: Buffer;
  private written = 0;
  private timer?: NodeJS.Timeout;
  private sessionId?: string;
  private targetId?: string;
  private readonly startedAt = Date.now();

  private constructor(
    private readonly cdp: EventedCdp,
    private readonly sink: Writable,
    private readonly framerate: number,
    private readonly log: Logger,
  ) {}

  /** Attaches to the page, seeds the first frame with a screenshot and starts writing at `framerate`. */
  static async start(mux: CdpMux, options: { sink: Writable; framerate: number; log: Logger }): Promise<ScreencastFeed> {
    const cdp = await openEventedCdp(mux);
    const feed = new ScreencastFeed(cdp, options.sink, options.framerate, options.log);
    try {
      cdp.onEvent((event) => feed.onEvent(event));
      await cdp.send('Target.setDiscoverTargets', { discover: true });
      await feed.follow(await feed.pickPage());
    } catch (error) {
      cdp.close();
      throw error;
    }
    feed.timer = setInterval(() => feed.pace(), Math.max(10, Math.floor(1000 / options.framerate / 2)));
    return feed;
  }

  /** Writes the frames still due, ends ffmpeg's input (it then finishes the file) and detaches. */
  stop(): void {
    clearInterval(this.timer);
    this.pace();
    this.sink.end();
    this.cdp.close(new Error('the recording stopped'));
  }

  private async pickPage(exclude?: string): Promise<string> {
    const { targetInfos } = await this.cdp.send<{ targetInfos: TargetInfo[] }>('Target.getTargets');
    const page = targetInfos.find((t) => t.type === 'page' && t.targetId !== exclude);
    if (!page) throw new Error('the browser has no page to record');
    return page.targetId;
  }

  private async follow(targetId: string): Promise<void> {
    const { sessionId } = await this.cdp.send<{ sessionId: string }>('Target.attachToTarget', { targetId, flatten: true });
    this.sessionId = sessionId;
    this.targetId = targetId;
    await this.cdp.send('Page.enable', {}, sessionId);
    const shot = await this.cdp.send<{ data: string }>('Page.captureScreenshot', { format: 'jpeg', quality: 80 }, sessionId);
    this.latest ??= Buffer.from(shot.data, 'base64');
    await this.cdp.send('Page.startScreencast', { format: 'jpeg', quality: 80, everyNthFrame: 1 }, sessionId);
  }

  private onEvent(event: CdpEvent): void {
    if (event.method === 'Page.screencastFrame' && event.sessionId === this.sessionId) {
      this.latest = Buffer.from(event.params.data as string, 'base64');
      this.cdp.send('Page.screencastFrameAck', { sessionId: event.params.sessionId }, event.sessionId).catch(() => undefined);
      return;
    }
    if (event.method === 'Target.targetDestroyed' && event.params.targetId === this.targetId) {
      this.sessionId = undefined;
      this.pickPage(this.targetId)
        .then((next) => this.follow(next))
        .catch((error: unknown) => this.log.warn({ err: error }, 'replay: the recorded tab closed and no other can be followed; the last frame holds'));
    }
  }

  /** Writes as many copies of the latest frame as the wall clock says are due since the start. */
  private pace(): void {
    if (!this.latest || this.sink.writableEnded) return;
    const due = Math.floor(((Date.now() - this.startedAt) / 1000) * this.framerate) + 1;
    for (; this.written < due; this.written++) this.sink.write(this.latest);
  }
}
