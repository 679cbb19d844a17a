import { describe, expect, it } from 'vitest';
import { REPEAT_WINDOW_MS, signalPolicy } from '../../api/src/shutdown-signals.js';

function policyAt(times: number[]) {
  let i = 0;
  const verdict = signalPolicy(() => times[i++]!);
  return times.map(() => verdict('SIGTERM'));
}

describe('signalPolicy', () => {
  it('stops on the first signal, hurries on a second, abandons only on a third', () => {
    expect(policyAt([0, 5_000, 10_000])).toEqual(['stop', 'hurry', 'abandon']);
  });

  it('counts a signal arriving within the window of the previous one as the same (make forwarding the group\'s SIGTERM)', () => {
    expect(policyAt([0, 2, 3_000, 3_001, 3_002])).toEqual(['stop', 'repeat', 'hurry', 'repeat', 'repeat']);
  });

  it('measures the window from the last signal counted, so Ctrl-C pressed again and again still escalates', () => {
    const step = REPEAT_WINDOW_MS / 2;
    expect(policyAt([0, step, 2 * step, 3 * step, 4 * step])).toEqual(['stop', 'repeat', 'hurry', 'repeat', 'abandon']);
  });

  it('a different signal always counts, however soon', () => {
    const verdict = signalPolicy(() => 0);
    expect([verdict('SIGTERM'), verdict('SIGINT'), verdict('SIGTERM')]).toEqual(['stop', 'hurry', 'abandon']);
  });

  it('a signal just past the window counts', () => {
    expect(policyAt([0, REPEAT_WINDOW_MS])).toEqual(['stop', 'hurry']);
  });
});
