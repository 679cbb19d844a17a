import type { TelemetryEvent } from '../../../contract/telemetry.js';
import { pageMessageEvent } from './page-events.js';
import type { TargetContext } from './cdp-events.js';

type Draft = Omit<TelemetryEvent, 'ts'>;

/** Challenges one tab holds open at most (a page may render many widgets; the rest are not watched to the end). */
export const MAX_OPEN_CHALLENGES = 32;

/**
 * The captcha challenges a tab has open, on the agent's side: the page announces each
 * (captcha_open) and reports its outcome, which is emitted once; a challenge still open
 * when its tab navigates or closes ends as abandoned here, as the page's pagehide report
 * may not make it out of an unloading document. An outcome for a challenge never
 * announced, or already ended, is dropped.
 */
export class OpenChallenges {
  private readonly open = new Map<string, { at: number; message: Record<string, unknown> }>();

  announce(message: Record<string, unknown>, now: number): void {
    const id = message.challenge_id;
    if (typeof id !== 'string' || this.open.has(id) || this.open.size >= MAX_OPEN_CHALLENGES) return;
    this.open.set(id, { at: now, message });
  }

  /** The outcome event of an open challenge (it is then closed); null for any other. */
  finish(message: Record<string, unknown>, ctx: TargetContext): Draft | null {
    const id = message.challenge_id;
    if (typeof id !== 'string' || !this.open.delete(id)) return null;
    return pageMessageEvent({ ...message, t: 'captcha' }, ctx);
  }

  /** The document went away: every challenge still open, abandoned, with the agent's measure of its duration. */
  abandonAll(ctx: TargetContext, now: number): Draft[] {
    const out: Draft[] = [];
    for (const { at, message } of this.open.values()) {
      const event = pageMessageEvent({ ...message, t: 'captcha', status: 'abandoned', duration_ms: now - at }, ctx);
      if (event) out.push(event);
    }
    this.open.clear();
    return out;
  }
}
