import { describe, expect, it } from 'vitest';
import { kubeTime, nextCondition, withCondition, type Condition } from '../../operator/src/reconcilers/conditions.js';

// The one metav1.Condition builder every reconciler's status goes through.

const at = new Date('2026-05-01T10:00:00.250Z');
const later = new Date('2026-05-01T10:05:00.750Z');
const ready = (status: Condition['status'], reason: string) => ({ type: 'Ready', status, reason, message: `${reason} now` });

describe('nextCondition', () => {
  it('stamps a new condition with the time, at second precision for a Date and as given for a string', () => {
    expect(nextCondition(undefined, ready('False', 'Starting'), 3, at)).toEqual({
      type: 'Ready',
      status: 'False',
      observedGeneration: 3,
      lastTransitionTime: '2026-05-01T10:00:00Z',
      reason: 'Starting',
      message: 'Starting now',
    });
    expect(nextCondition(undefined, ready('False', 'Starting'), 3, at.toISOString()).lastTransitionTime).toBe('2026-05-01T10:00:00.250Z');
  });

  it('keeps lastTransitionTime while the status holds, whatever the reason, and moves it when the status flips', () => {
    const first = nextCondition(undefined, ready('False', 'Starting'), 1, at);
    const sameStatus = nextCondition([first], ready('False', 'PodPending'), 2, later);
    expect(sameStatus).toMatchObject({ reason: 'PodPending', observedGeneration: 2, lastTransitionTime: kubeTime(at) });
    expect(nextCondition([sameStatus], ready('True', 'Running'), 2, later).lastTransitionTime).toBe(kubeTime(later));
  });

  it('reads only the previous condition of its own type, and leaves out observedGeneration when there is none', () => {
    const other: Condition = { type: 'Draining', status: 'False', lastTransitionTime: 'earlier', reason: 'x', message: '' };
    const built = nextCondition([other], ready('False', 'Starting'), undefined, at);
    expect(built.lastTransitionTime).toBe(kubeTime(at));
    expect(built).not.toHaveProperty('observedGeneration');
  });
});

describe('withCondition', () => {
  const a: Condition = { type: 'A', status: 'True', lastTransitionTime: 't', reason: 'r', message: '' };
  const b: Condition = { type: 'B', status: 'True', lastTransitionTime: 't', reason: 'r', message: '' };

  it('replaces the condition of the same type in place and appends a new type', () => {
    const b2 = { ...b, status: 'False' as const };
    expect(withCondition([a, b], b2)).toEqual([a, b2]);
    expect(withCondition([b, a], b2)).toEqual([b2, a]);
    expect(withCondition([a], b)).toEqual([a, b]);
    expect(withCondition(undefined, a)).toEqual([a]);
  });
});
