import type { Writable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import type { CdpMux } from '../cdp/mux.js';
import { openEventedCdp, type CdpEvent, type EventedCdp } from '../curl/cdp-session.js';

/**
 * A headless browser has no display to grab: the recording is made of CDP screencast frames
 * of its page (Page.startScreencast on the agent's own connection). Chromium sends a frame
 * only when the page changes, so a pacer writes the latest frame to ffmpeg once per tick of
 * the wall clock: a still page still yields a video as long as the recording, at the asked
 * frame rate.
 *
 * The recording follows the tab in front, as a screen would show it: a tab a client opens
 * or brings to the front (Target.createTarget, Target.activateTarget, Page.bringToFront:
 * the mux reports them; hidden tabs such as curl's are not followed), a tab a page opens
 * (window.open, a target=_blank link: a page target with an opener), and when the recorded
 * tab closes, the newest other tab. One switch at a time, in the order they came.
 */

/** How long following another tab may take before the next switch goes ahead. */
const SWITCH_TIMEOUT_MS = 5_000;

interface TargetInfo {
  targetId: string;
  type: string;
  openerId?: string;
  subtype?: string;
}

export class ScreencastFeed {
  private latest?: Buffer;
  private written = 0;
  private timer?: NodeJS.Timeout;
  private sessionId?: string;
  private targetId?: string;
  /** Switches run one after another, so the last one asked for wins. */
  private switching: Promise<void> = Promise.resolve();
  private unsubscribe?: () => void;
  private stopped = false;
  /** Whether the followed tab sent a frame since it was followed (then its screenshot is older). */
  private frameSince = false;
  /** Counts follows, so one that answers after a later one started changes nothing. */
  private generation = 0;
  /** Set once the first tab is followed: discovery first reports the tabs already open, which are not news. */
  private following = false;
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
      await feed.follow(await feed.pickPage({ prefer: mux.frontTarget() }), { awaitSeed: true });
      feed.following = true;
    } catch (error) {
      cdp.close();
      throw error;
    }
    feed.unsubscribe = mux.onActivation((targetId) => feed.switchTo(targetId, 'brought to the front'));
    feed.timer = setInterval(() => feed.pace(), Math.max(10, Math.floor(1000 / options.framerate / 2)));
    return feed;
  }

  /** Writes the frames still due, ends ffmpeg's input (it then finishes the file) and detaches. */
  stop(): void {
    this.stopped = true;
    this.unsubscribe?.();
    clearInterval(this.timer);
    this.pace();
    this.sink.end();
    this.cdp.close(new Error('the recording stopped'));
  }

  /** `prefer` when it is an open tab, else the newest page tab other than `exclude` (Chromium lists the newest first). */
  private async pickPage(choice: { prefer?: string | undefined; exclude?: string | undefined }): Promise<string> {
    const { targetInfos } = await this.cdp.send<{ targetInfos: TargetInfo[] }>('Target.getTargets');
    const pages = targetInfos.filter((t) => t.type === 'page' && t.targetId !== choice.exclude);
    const page = pages.find((t) => t.targetId === choice.prefer) ?? pages[0];
    if (!page) throw new Error('the browser has no page to record');
    return page.targetId;
  }

  /**
   * Moves the screencast to `targetId`. A new tab may not answer a screenshot until it has
   * painted (Chromium holds it), so only the first follow waits for the screenshot that
   * seeds the video; a switch keeps the previous frame until the tab's own comes.
   */
  private async follow(targetId: string, options: { awaitSeed: boolean }): Promise<void> {
    const generation = ++this.generation;
    const previous = this.sessionId;
    const { sessionId } = await this.cdp.send<{ sessionId: string }>('Target.attachToTarget', { targetId, flatten: true });
    if (generation !== this.generation) {
      // A later switch (after this one timed out) went ahead: it wins.
      this.cdp.send('Target.detachFromTarget', { sessionId }).catch(() => undefined);
      return;
    }
    // From here on the frames are the new tab's; the old tab's are ignored.
    this.sessionId = sessionId;
    this.targetId = targetId;
    this.frameSince = false;
    if (previous) this.cdp.send('Target.detachFromTarget', { sessionId: previous }).catch(() => undefined);
    await this.cdp.send('Page.enable', {}, sessionId);
    await this.cdp.send('Page.startScreencast', { format: 'jpeg', quality: 80, everyNthFrame: 1 }, sessionId);
    // A still tab sends no frame until it changes: a screenshot stands in until one comes.
    const seed = this.cdp.send<{ data: string }>('Page.captureScreenshot', { format: 'jpeg', quality: 80 }, sessionId).then((shot) => {
      if (this.sessionId === sessionId && !this.frameSince) this.latest = Buffer.from(shot.data, 'base64');
    });
    if (options.awaitSeed) await seed;
    else seed.catch(() => undefined);
  }

  private switchTo(targetId: string, why: string): void {
    this.switching = this.switching.then(async () => {
      if (this.stopped || targetId === this.targetId) return;
      // A tab that never answers (it hangs, it is paused) must not hold up the switches after it.
      await Promise.race([this.follow(targetId, { awaitSeed: false }), sleep(SWITCH_TIMEOUT_MS, undefined, { ref: false }).then(() => Promise.reject(new Error(`no answer in ${SWITCH_TIMEOUT_MS} ms`)))]).catch((error: unknown) =>
        this.log.warn({ err: error, why }, 'replay: cannot follow the tab; the recording may stay on the previous one'),
      );
    });
  }

  private onEvent(event: CdpEvent): void {
    if (event.method === 'Page.screencastFrame' && event.sessionId === this.sessionId) {
      this.frameSince = true;
      this.latest = Buffer.from(event.params.data as string, 'base64');
      this.cdp.send('Page.screencastFrameAck', { sessionId: event.params.sessionId }, event.sessionId).catch(() => undefined);
      return;
    }
    const info = event.params.targetInfo as TargetInfo | undefined;
    // A popup of a page.
    if (this.following && event.method === 'Target.targetCreated' && info?.type === 'page' && info.openerId && info.subtype !== 'prerender') {
      this.switchTo(info.targetId, 'a tab opened by a page');
      return;
    }
    if (event.method === 'Target.targetDestroyed' && event.params.targetId === this.targetId) {
      const closed = this.targetId;
      this.switching = this.switching.then(async () => {
        if (this.stopped || closed !== this.targetId) return;
        await this.pickPage({ exclude: closed })
          .then((next) => this.follow(next, { awaitSeed: false }))
          .catch((error: unknown) => this.log.warn({ err: error }, 'replay: the recorded tab closed and no other can be followed; the last frame holds'));
      });
    }
  }

  /** Writes as many copies of the latest frame as the wall clock says are due since the start. */
  private pace(): void {
    if (!this.latest || this.sink.writableEnded) return;
    const due = Math.floor(((Date.now() - this.startedAt) / 1000) * this.framerate) + 1;
    for (; this.written < due; this.written++) this.sink.write(this.latest);
  }
}
