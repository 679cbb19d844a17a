import { describe, expect, it } from 'vitest';
import {
  AWAIT_LAUNCH_SPEC_REQUEUE_MS,
  planBrowserSession,
  POD_STARTING_REQUEUE_MS,
  REASONS,
  type DesiredSessionStatus,
  type SessionObservation,
  type SessionPlan,
} from '../../operator/src/reconcilers/browser-session-plan.js';
import type { ObservedBrowser } from '../../contract/browser-runtime.js';

const POD = 'browser-bs-a1';
const AGENT = 'http://127.0.0.9:9222';

const base: SessionObservation = {
  deleting: false,
  hasFinalizer: true,
  launchSecretName: 'bs-a1-launch',
  podName: POD,
  launchSpec: { state: 'present' },
};

const browser = (phase: ObservedBrowser['phase'], extra: Partial<ObservedBrowser> = {}): ObservedBrowser => ({ browserId: 'bs_a1', phase, labels: {}, ...extra });

const starting: DesiredSessionStatus = { phase: 'Pending', ready: false, reason: REASONS.podStarting, message: `pod ${POD} is starting`, podName: POD };
const running: DesiredSessionStatus = { phase: 'Running', ready: true, reason: REASONS.podReady, message: `browser running in pod ${POD}`, podName: POD, agentUrl: AGENT };

const rows: [string, Partial<SessionObservation>, SessionPlan][] = [
  // Creation and launch
  ['a new resource gets the finalizer first, then a launch', { hasFinalizer: false }, { actions: [{ type: 'addFinalizer' }, { type: 'launch' }], status: starting }],
  [
    'no launch Secret yet: waits for it, looking again soon',
    { launchSpec: { state: 'absent' } },
    {
      actions: [],
      status: { phase: 'Pending', ready: false, reason: REASONS.awaitingLaunchSpec, message: 'waiting for the launch spec in Secret bs-a1-launch' },
      requeueAfterMs: AWAIT_LAUNCH_SPEC_REQUEUE_MS,
    },
  ],
  [
    'an unreadable launch spec fails the session',
    { launchSpec: { state: 'invalid', message: 'not JSON' } },
    { actions: [], status: { phase: 'Failed', ready: false, reason: REASONS.invalidLaunchSpec, message: 'not JSON' } },
  ],
  ['a launch in flight is left alone', { launch: { state: 'running' }, browser: browser('Starting') }, { actions: [], status: starting }],
  ['a starting pod without a launch of ours (new leader) is launched again, which awaits it', { browser: browser('Starting') }, { actions: [{ type: 'launch' }], status: starting }],
  [
    'a starting pod whose launch Secret is gone is watched, not relaunched',
    { browser: browser('Starting'), launchSpec: { state: 'absent' } },
    { actions: [], status: starting, requeueAfterMs: POD_STARTING_REQUEUE_MS },
  ],
  [
    'a launch that ended without a browser (pod deleted while starting) fails the session rather than start over',
    { launch: { state: 'finished', result: browser('Gone', { reason: 'pod deleted while starting' }) }, browser: undefined },
    { actions: [{ type: 'forgetLaunch' }], status: { phase: 'Failed', ready: false, reason: REASONS.launchFailed, message: 'pod deleted while starting' } },
  ],
  [
    'a launch that timed out (runtime removed the pod) fails the session',
    { launch: { state: 'finished', result: browser('Failed', { reason: 'pod not ready within 120000 ms' }) } },
    { actions: [{ type: 'forgetLaunch' }], status: { phase: 'Failed', ready: false, reason: REASONS.launchFailed, message: 'pod not ready within 120000 ms' } },
  ],
  [
    'a finished launch whose pod is starting again is launched again',
    { launch: { state: 'finished', result: browser('Ready', { agentUrl: AGENT }) }, browser: browser('Pending') },
    { actions: [{ type: 'forgetLaunch' }, { type: 'launch' }], status: starting },
  ],
  // Running
  ['a ready pod makes the session Running with its agent URL', { launch: { state: 'finished', result: browser('Ready', { agentUrl: AGENT }) }, browser: browser('Ready', { agentUrl: AGENT }) }, { actions: [{ type: 'forgetLaunch' }], status: running }],
  ['a ready pod found by a new leader is reported without a launch', { browser: browser('Ready', { agentUrl: AGENT }) }, { actions: [], status: running }],
  ['a running session stays Running (status.ts decides nothing changed)', { reportedPhase: 'Running', browser: browser('Ready', { agentUrl: AGENT }) }, { actions: [], status: running }],
  // Failures
  [
    'a pod that failed while starting fails the launch with the kubelet’s reason',
    { browser: browser('Failed', { reason: 'Error: exit code 1' }) },
    { actions: [], status: { phase: 'Failed', ready: false, reason: REASONS.launchFailed, message: 'Error: exit code 1', podName: POD } },
  ],
  [
    'a running browser whose pod failed: BrowserExited with the pod’s reason',
    { reportedPhase: 'Running', browser: browser('Failed', { reason: 'Error: exit code 137' }) },
    { actions: [], status: { phase: 'Failed', ready: false, reason: REASONS.browserExited, message: 'Error: exit code 137', podName: POD } },
  ],
  [
    'a running browser whose pod is being deleted behind our back: BrowserExited',
    { reportedPhase: 'Running', browser: browser('Terminating') },
    { actions: [], status: { phase: 'Failed', ready: false, reason: REASONS.browserExited, message: 'pod is being deleted', podName: POD } },
  ],
  [
    'a running browser whose pod vanished: BrowserExited, no relaunch',
    { reportedPhase: 'Running', browser: undefined },
    { actions: [], status: { phase: 'Failed', ready: false, reason: REASONS.browserExited, message: `pod ${POD} vanished` } },
  ],
  [
    'a running browser whose pod is no longer ready: BrowserExited',
    { reportedPhase: 'Running', browser: browser('Starting') },
    { actions: [], status: { phase: 'Failed', ready: false, reason: REASONS.browserExited, message: `pod ${POD} is no longer ready (Starting)`, podName: POD } },
  ],
  ['a failed session stays failed: no relaunch, no status write', { reportedPhase: 'Failed', browser: undefined }, { actions: [] }],
  ['a failed session forgets a leftover launch record', { reportedPhase: 'Failed', launch: { state: 'finished', result: browser('Failed') } }, { actions: [{ type: 'forgetLaunch' }] }],
  // Deletion
  ['a deleted resource without our finalizer is not ours to hold', { deleting: true, hasFinalizer: false, browser: browser('Ready', { agentUrl: AGENT }) }, { actions: [] }],
  [
    'a deleted resource: Terminating, then browser, launch Secret and finalizer go',
    { deleting: true, reportedPhase: 'Running', browser: browser('Ready', { agentUrl: AGENT }) },
    {
      actions: [{ type: 'terminate' }, { type: 'deleteLaunchSecret' }, { type: 'forgetLaunch' }, { type: 'removeFinalizer' }],
      status: { phase: 'Terminating', ready: false, reason: REASONS.terminating, message: 'resource deleted: ending the browser' },
    },
  ],
  [
    'a resource deleted during its launch: the launch is abandoned first',
    { deleting: true, launch: { state: 'running' }, browser: browser('Starting') },
    {
      actions: [{ type: 'abortLaunch' }, { type: 'terminate' }, { type: 'deleteLaunchSecret' }, { type: 'forgetLaunch' }, { type: 'removeFinalizer' }],
      status: { phase: 'Terminating', ready: false, reason: REASONS.terminating, message: 'resource deleted: ending the browser' },
    },
  ],
  [
    'a retried deletion does not report Terminating again',
    { deleting: true, reportedPhase: 'Terminating', browser: undefined },
    { actions: [{ type: 'terminate' }, { type: 'deleteLaunchSecret' }, { type: 'forgetLaunch' }, { type: 'removeFinalizer' }] },
  ],
];

describe('planBrowserSession', () => {
  it.each(rows)('%s', (_name, observed, expected) => {
    expect(planBrowserSession({ ...base, ...observed })).toEqual(expected);
  });
});
