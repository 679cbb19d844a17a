/**
 * Which Kubernetes Event a reconciler records when a resource's Ready condition changes
 * reason: pure, so the choice is table-tested and the reconcilers only pass it on.
 *
 * Events mark transitions, never steady states: a resync that finds nothing new records
 * nothing, and a new leader that reads the same reason from the resource's status does not
 * repeat its predecessor's event. Event reasons are the condition reasons, so `kubectl
 * describe` and `kubectl get -o yaml` use one vocabulary; Warning marks what needs a human
 * (a launch that failed, a browser that died, a manifest the API refuses).
 */
import { API_VERSION, SESSION_REASONS } from '../../../contract/kinds.js';
import type { EventInput, EventRegarding } from '../k8s/event-recorder.js';
import { READY_REASONS as CONNECTION_REASONS } from './auth-connection-plan.js';
import { READY_REASONS } from './browser-pool-plan.js';

/** The controller name Events carry (events.k8s.io reportingController). */
export const REPORTING_CONTROLLER = 'browserplane.dev/operator';

/** Event reasons that are not condition reasons. */
export const EVENT_REASONS = {
  podDeleted: 'PodDeleted',
  synced: 'Synced',
  drained: 'Drained',
} as const;

const SESSION_EVENTS: Record<string, Pick<EventInput, 'type' | 'action'>> = {
  [SESSION_REASONS.podStarting]: { type: 'Normal', action: 'Launch' },
  [SESSION_REASONS.podReady]: { type: 'Normal', action: 'Launch' },
  [SESSION_REASONS.launchFailed]: { type: 'Warning', action: 'Launch' },
  [SESSION_REASONS.invalidLaunchSpec]: { type: 'Warning', action: 'Launch' },
  [SESSION_REASONS.browserExited]: { type: 'Warning', action: 'Observe' },
  [SESSION_REASONS.terminating]: { type: 'Normal', action: 'Terminate' },
  // AwaitingLaunchSpec is left out: the API writes the Secret a moment after the resource.
};

const POOL_EVENTS: Record<string, Pick<EventInput, 'type' | 'action'>> = {
  [READY_REASONS.filling]: { type: 'Normal', action: 'Fill' },
  [READY_REASONS.full]: { type: 'Normal', action: 'Fill' },
  [READY_REASONS.invalidSpec]: { type: 'Warning', action: 'Sync' },
  [READY_REASONS.projectNotFound]: { type: 'Warning', action: 'Sync' },
  [READY_REASONS.nameConflict]: { type: 'Warning', action: 'Sync' },
  [READY_REASONS.draining]: { type: 'Normal', action: 'Drain' },
};

const CONNECTION_EVENTS: Record<string, Pick<EventInput, 'type' | 'action'>> = {
  [CONNECTION_REASONS.authenticated]: { type: 'Normal', action: 'Authenticate' },
  [CONNECTION_REASONS.loginInProgress]: { type: 'Normal', action: 'Authenticate' },
  // The site logged the profile out (a health check found the login form): a person may be needed.
  [CONNECTION_REASONS.needsAuth]: { type: 'Warning', action: 'Authenticate' },
  [CONNECTION_REASONS.invalidSpec]: { type: 'Warning', action: 'Sync' },
  [CONNECTION_REASONS.projectNotFound]: { type: 'Warning', action: 'Sync' },
  [CONNECTION_REASONS.nameConflict]: { type: 'Warning', action: 'Sync' },
};

export type ReadyTransition = { before: string | undefined; after: string; message: string };

function transition(table: Record<string, Pick<EventInput, 'type' | 'action'>>, { before, after, message }: ReadyTransition): EventInput | undefined {
  if (before === after) return undefined;
  const kind = table[after];
  return kind ? { ...kind, reason: after, note: message } : undefined;
}

/** The Event a BrowserSession's Ready reason change deserves, if any. */
export const sessionTransitionEvent = (change: ReadyTransition): EventInput | undefined => transition(SESSION_EVENTS, change);

/** The Event a BrowserPool's Ready reason change deserves, if any. */
export const poolTransitionEvent = (change: ReadyTransition): EventInput | undefined => transition(POOL_EVENTS, change);

/** The Event an AuthConnection's Ready reason change deserves, if any. */
export const connectionTransitionEvent = (change: ReadyTransition): EventInput | undefined => transition(CONNECTION_EVENTS, change);

/** The reason of the Ready condition in a status, if it has one. */
export function readyReasonOf(status: unknown): string | undefined {
  const conditions = (status as { conditions?: { type: string; reason?: string }[] } | undefined)?.conditions;
  return conditions?.find((condition) => condition.type === 'Ready')?.reason;
}

/** The reference an Event about one of our resources carries. */
export function regardingOf(kind: 'BrowserSession' | 'BrowserPool' | 'AuthConnection', metadata: { name?: string; namespace?: string; uid?: string }): EventRegarding {
  return { apiVersion: API_VERSION, kind, name: metadata.name ?? '', namespace: metadata.namespace ?? '', ...(metadata.uid ? { uid: metadata.uid } : {}) };
}
