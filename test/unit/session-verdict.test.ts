import { describe, expect, it } from 'vitest';
import type { BrowserPhase, ObservedBrowser } from '../../contract/browser-runtime.js';
import { sessionVerdict } from '../../api/src/modules/browsers/session-verdict.js';

// The one decision start-up adoption (settled) and the reaper's passes (not settled, but a
// 'starting' row past its launch is) make about a live session row and its browser.

const browser = (phase: BrowserPhase, reason?: string): ObservedBrowser => ({ browserId: 'b1', phase, labels: {}, ...(reason ? { reason } : {}) });
const running = { phase: 'running' as const };
const starting = { phase: 'starting' as const };

describe('sessionVerdict', () => {
  it('a starting row: its create was lost once settled, else its launch may still finish; the browser does not count', () => {
    for (const observed of [undefined, browser('Ready'), browser('Failed', 'x')]) {
      expect(sessionVerdict(starting, { browser: observed, settled: true })).toEqual({ kind: 'end', reason: 'launch_interrupted' });
      expect(sessionVerdict(starting, { browser: observed, settled: false })).toEqual({ kind: 'wait' });
    }
  });

  it('a running row with a Ready browser carries on, settled or not', () => {
    expect(sessionVerdict(running, { browser: browser('Ready'), settled: true })).toEqual({ kind: 'keep' });
    expect(sessionVerdict(running, { browser: browser('Ready'), settled: false })).toEqual({ kind: 'keep' });
  });

  it('a Failed browser ends its session as crashed, with what the runtime said', () => {
    expect(sessionVerdict(running, { browser: browser('Failed', 'agent killed by SIGKILL'), settled: false })).toEqual({
      kind: 'end',
      reason: 'browser_crashed',
      crash: 'agent killed by SIGKILL',
    });
    expect(sessionVerdict(running, { browser: browser('Failed'), settled: true })).toEqual({ kind: 'end', reason: 'browser_crashed' });
  });

  it('a browser the runtime does not have, or has as Gone, ends its session as gone', () => {
    for (const settled of [true, false]) {
      expect(sessionVerdict(running, { browser: undefined, settled })).toEqual({ kind: 'end', reason: 'browser_gone' });
      expect(sessionVerdict(running, { browser: browser('Gone'), settled })).toEqual({ kind: 'end', reason: 'browser_gone' });
    }
  });

  it('a browser still in motion (Pending, Starting, Terminating) waits, unless settled: then it is gone', () => {
    for (const phase of ['Pending', 'Starting', 'Terminating'] as const) {
      expect(sessionVerdict(running, { browser: browser(phase), settled: false })).toEqual({ kind: 'wait' });
      expect(sessionVerdict(running, { browser: browser(phase), settled: true })).toEqual({ kind: 'end', reason: 'browser_gone' });
    }
  });
});
