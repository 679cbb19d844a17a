import { describe, expect, it } from 'vitest';
import { SESSION_REASONS } from '../../contract/kinds.js';
import { READY_REASONS } from '../../operator/src/reconcilers/browser-pool-plan.js';
import { READY_REASONS as CONNECTION_REASONS } from '../../operator/src/reconcilers/auth-connection-plan.js';
import { connectionTransitionEvent, poolTransitionEvent, readyReasonOf, sessionTransitionEvent } from '../../operator/src/reconcilers/transition-events.js';

describe('transition events', () => {
  it.each([
    [undefined, SESSION_REASONS.podStarting, { type: 'Normal', action: 'Launch', reason: 'PodStarting' }],
    [SESSION_REASONS.podStarting, SESSION_REASONS.podReady, { type: 'Normal', action: 'Launch', reason: 'PodReady' }],
    [SESSION_REASONS.podStarting, SESSION_REASONS.launchFailed, { type: 'Warning', action: 'Launch', reason: 'LaunchFailed' }],
    [SESSION_REASONS.podReady, SESSION_REASONS.browserExited, { type: 'Warning', action: 'Observe', reason: 'BrowserExited' }],
    [SESSION_REASONS.awaitingLaunchSpec, SESSION_REASONS.invalidLaunchSpec, { type: 'Warning', action: 'Launch', reason: 'InvalidLaunchSpec' }],
    [SESSION_REASONS.podReady, SESSION_REASONS.terminating, { type: 'Normal', action: 'Terminate', reason: 'Terminating' }],
  ])('a BrowserSession going from %s to %s records %o', (before, after, expected) => {
    expect(sessionTransitionEvent({ before, after, message: 'why' })).toEqual({ ...expected, note: 'why' });
  });

  it('records nothing for a reason that did not change, nor for the moment before the launch Secret', () => {
    expect(sessionTransitionEvent({ before: SESSION_REASONS.podReady, after: SESSION_REASONS.podReady, message: 'x' })).toBeUndefined();
    expect(sessionTransitionEvent({ before: undefined, after: SESSION_REASONS.awaitingLaunchSpec, message: 'x' })).toBeUndefined();
  });

  it.each([
    [undefined, READY_REASONS.filling, 'Normal'],
    [READY_REASONS.filling, READY_REASONS.full, 'Normal'],
    [READY_REASONS.full, READY_REASONS.invalidSpec, 'Warning'],
    [undefined, READY_REASONS.nameConflict, 'Warning'],
    [undefined, READY_REASONS.projectNotFound, 'Warning'],
    [READY_REASONS.full, READY_REASONS.draining, 'Normal'],
  ])('a BrowserPool going from %s to %s records a %s event of that reason', (before, after, type) => {
    expect(poolTransitionEvent({ before, after, message: 'm' })).toMatchObject({ type, reason: after, note: 'm' });
  });

  it.each([
    [undefined, CONNECTION_REASONS.needsAuth, 'Warning'],
    [CONNECTION_REASONS.needsAuth, CONNECTION_REASONS.loginInProgress, 'Normal'],
    [CONNECTION_REASONS.loginInProgress, CONNECTION_REASONS.authenticated, 'Normal'],
    [CONNECTION_REASONS.authenticated, CONNECTION_REASONS.needsAuth, 'Warning'],
    [undefined, CONNECTION_REASONS.invalidSpec, 'Warning'],
    [undefined, CONNECTION_REASONS.nameConflict, 'Warning'],
  ])('an AuthConnection going from %s to %s records a %s event of that reason', (before, after, type) => {
    expect(connectionTransitionEvent({ before, after, message: 'm' })).toMatchObject({ type, reason: after, note: 'm' });
  });

  it('records nothing when an AuthConnection stays where it was', () => {
    expect(connectionTransitionEvent({ before: CONNECTION_REASONS.authenticated, after: CONNECTION_REASONS.authenticated, message: 'm' })).toBeUndefined();
  });

  it('reads the Ready reason among other conditions', () => {
    expect(readyReasonOf({ conditions: [{ type: 'Draining', reason: 'Deleting' }, { type: 'Ready', reason: 'Draining' }] })).toBe('Draining');
    expect(readyReasonOf(undefined)).toBeUndefined();
  });
});
