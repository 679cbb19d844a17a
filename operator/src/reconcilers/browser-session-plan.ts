/**
 * What the BrowserSession reconciler should do, decided from what it observed. Pure: the
 * table in test/unit/browser-session-plan.test.ts covers every branch without a cluster.
 *
 * A session is one browser, once: it goes Pending → Running → (Failed), and a browser that
 * failed or vanished is never launched again under the same resource (the API ends its
 * row and deletes the resource; relaunching would hand a client a fresh browser behind
 * its back). Only a launch that never reached Running is retried, by the runtime's own
 * idempotent launch, which also picks up a pod a previous leader created.
 */
import { SESSION_REASONS, type SessionPhase } from '../../../contract/kinds.js';
import type { ObservedBrowser } from '../../../contract/browser-runtime.js';

export type { SessionPhase };

/** Reasons of the Ready condition (and of status.message's cause): the contract's spellings. */
export const REASONS = SESSION_REASONS;
export type Reason = (typeof REASONS)[keyof typeof REASONS];

/** The status the reconciler wants reported (conditions are derived from it in status.ts). */
export interface DesiredSessionStatus {
  phase: SessionPhase;
  ready: boolean;
  reason: Reason;
  message: string;
  podName?: string;
  agentUrl?: string;
}

export type SessionAction =
  | { type: 'addFinalizer' }
  /** Start the runtime's launch in the background (it blocks until the pod is Ready). */
  | { type: 'launch' }
  /** Stop waiting for a launch in flight (the resource is going away). */
  | { type: 'abortLaunch' }
  | { type: 'terminate' }
  | { type: 'deleteLaunchSecret' }
  | { type: 'removeFinalizer' }
  /** Forget this process's launch record: the status now carries its outcome. */
  | { type: 'forgetLaunch' };

export interface SessionPlan {
  actions: SessionAction[];
  /** Undefined: leave the status as it is. */
  status?: DesiredSessionStatus;
  requeueAfterMs?: number;
}

/** A launch this process started for the resource, as far as it has got. */
export type LaunchRecord = { state: 'running' } | { state: 'finished'; result: ObservedBrowser };

export type LaunchSpecState = { state: 'absent' } | { state: 'invalid'; message: string } | { state: 'present' };

export interface SessionObservation {
  deleting: boolean;
  hasFinalizer: boolean;
  /** The phase last reported in status (the reconciler's own last write, else the cache's). */
  reportedPhase?: string;
  launchSecretName: string;
  podName: string;
  launchSpec: LaunchSpecState;
  /** What the runtime sees of the session's browser now. */
  browser?: ObservedBrowser;
  launch?: LaunchRecord;
}

/** How soon to look again for a launch Secret that has not appeared (the Secret watch usually wins). */
export const AWAIT_LAUNCH_SPEC_REQUEUE_MS = 2_000;
/** How soon to look again at a pod that is starting without a launch of ours waiting on it. */
export const POD_STARTING_REQUEUE_MS = 5_000;

export function planBrowserSession(observed: SessionObservation): SessionPlan {
  if (observed.deleting) return planDeletion(observed);
  const actions: SessionAction[] = observed.hasFinalizer ? [] : [{ type: 'addFinalizer' }];
  const plan = planLife(observed);
  return { ...plan, actions: [...actions, ...plan.actions] };
}

function planDeletion(observed: SessionObservation): SessionPlan {
  // Without our finalizer the resource is not ours to hold back (or we already let go).
  if (!observed.hasFinalizer) return { actions: [] };
  const actions: SessionAction[] = [];
  if (observed.launch?.state === 'running') actions.push({ type: 'abortLaunch' });
  // Terminate is idempotent and also removes the pod's own Secret, which a leader that
  // died between creating it and the pod can leave behind: always called.
  actions.push({ type: 'terminate' }, { type: 'deleteLaunchSecret' }, { type: 'forgetLaunch' }, { type: 'removeFinalizer' });
  const status: DesiredSessionStatus | undefined =
    observed.reportedPhase === 'Terminating'
      ? undefined
      : { phase: 'Terminating', ready: false, reason: REASONS.terminating, message: 'resource deleted: ending the browser' };
  return { actions, ...(status ? { status } : {}) };
}

function failed(reason: Reason, message: string, podName?: string): DesiredSessionStatus {
  return { phase: 'Failed', ready: false, reason, message, ...(podName ? { podName } : {}) };
}

function planLife(observed: SessionObservation): SessionPlan {
  const { browser, launch, reportedPhase, podName } = observed;
  const wasRunning = reportedPhase === 'Running';
  // Terminal: a failed session stays failed until the API deletes it.
  if (reportedPhase === 'Failed') return { actions: launch ? [{ type: 'forgetLaunch' }] : [] };

  if (browser?.phase === 'Ready' && browser.agentUrl) {
    const status: DesiredSessionStatus = { phase: 'Running', ready: true, reason: REASONS.podReady, message: `browser running in pod ${podName}`, podName, agentUrl: browser.agentUrl };
    return { actions: launch?.state === 'finished' ? [{ type: 'forgetLaunch' }] : [], status };
  }
  if (browser && (browser.phase === 'Failed' || browser.phase === 'Gone' || (wasRunning && browser.phase === 'Terminating'))) {
    const why = browser.reason ?? (browser.phase === 'Terminating' ? 'pod is being deleted' : `pod ${browser.phase.toLowerCase()}`);
    return { actions: launch ? [{ type: 'forgetLaunch' }] : [], status: failed(wasRunning ? REASONS.browserExited : REASONS.launchFailed, why, podName) };
  }
  if (wasRunning) {
    // Running was reported, and now the pod is not ready or not there at all.
    const why = browser ? `pod ${podName} is no longer ready (${browser.phase})` : `pod ${podName} vanished`;
    return { actions: [], status: failed(REASONS.browserExited, why, browser ? podName : undefined) };
  }
  // A launch of ours that ended without a Ready browser and whose pod the runtime removed
  // (a start timeout): report it rather than start over.
  if (launch?.state === 'finished' && launch.result.phase !== 'Ready' && !browser) {
    return { actions: [{ type: 'forgetLaunch' }], status: failed(REASONS.launchFailed, launch.result.reason ?? `launch ended ${launch.result.phase}`) };
  }
  return planLaunch(observed);
}

function planLaunch(observed: SessionObservation): SessionPlan {
  const { browser, launch, launchSpec, launchSecretName, podName } = observed;
  const starting: DesiredSessionStatus = { phase: 'Pending', ready: false, reason: REASONS.podStarting, message: `pod ${podName} is starting`, podName };
  if (launch?.state === 'running') return { actions: [], status: starting };
  if (launchSpec.state === 'present') {
    // A finished launch whose browser is not Ready (e.g. the pod was deleted while it
    // started) is simply launched again: it never reached Running.
    return { actions: [...(launch ? [{ type: 'forgetLaunch' } as const] : []), { type: 'launch' }], status: starting };
  }
  if (browser) {
    // A pod exists (a previous leader launched it) but its launch spec is gone: watch it.
    return { actions: [], status: starting, requeueAfterMs: POD_STARTING_REQUEUE_MS };
  }
  if (launchSpec.state === 'invalid') return { actions: [], status: failed(REASONS.invalidLaunchSpec, launchSpec.message) };
  return {
    actions: [],
    status: { phase: 'Pending', ready: false, reason: REASONS.awaitingLaunchSpec, message: `waiting for the launch spec in Secret ${launchSecretName}` },
    requeueAfterMs: AWAIT_LAUNCH_SPEC_REQUEUE_MS,
  };
}
