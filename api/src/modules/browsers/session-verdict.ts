import type { ObservedBrowser } from '../../../../contract/browser-runtime.js';
import { DELETE_REASONS } from './service.js';
import type { SessionRow } from './store.js';

/**
 * What a live session row means given what the runtime observes of its browser: the one
 * decision behind start-up adoption (adopt.ts) and the reaper's passes (reaper.ts), which
 * differ only in what they know is still under way (SessionObservation.settled).
 */
export type SessionVerdict =
  /** The browser is Ready: the session carries on. */
  | { kind: 'keep' }
  /** Not decidable yet: a launch, or a change of the browser, may still be under way. Look again later. */
  | { kind: 'wait' }
  /** The session is over: `reason` is its deleted_reason; `crash` what the runtime said of a Failed browser. */
  | { kind: 'end'; reason: typeof DELETE_REASONS.interrupted | typeof DELETE_REASONS.crashed | typeof DELETE_REASONS.gone; crash?: string };

export interface SessionObservation {
  /** What the runtime reports of the session's browser; undefined when it has none. Not read for a 'starting' row. */
  browser: ObservedBrowser | undefined;
  /**
   * Nothing this service started for the row can still be under way: true at start-up (no
   * create survives a restart), and for a 'starting' row once its launch must have ended
   * (the reaper: the launch timeout and a grace after the row was written). A 'starting'
   * row then lost its create, and a running row's browser that is not Ready (Pending,
   * Starting, Terminating) will not become so.
   */
  settled: boolean;
}

export function sessionVerdict(row: Pick<SessionRow, 'phase'>, observed: SessionObservation): SessionVerdict {
  if (row.phase === 'starting') return observed.settled ? { kind: 'end', reason: DELETE_REASONS.interrupted } : { kind: 'wait' };
  const { browser } = observed;
  if (browser?.phase === 'Ready') return { kind: 'keep' };
  // The browser died on its own (Chromium crashed, the agent was killed).
  if (browser?.phase === 'Failed') return { kind: 'end', reason: DELETE_REASONS.crashed, ...(browser.reason !== undefined ? { crash: browser.reason } : {}) };
  if (!browser || browser.phase === 'Gone' || observed.settled) return { kind: 'end', reason: DELETE_REASONS.gone };
  return { kind: 'wait' };
}
