/**
 * The contract between the API (which writes desired state as custom resources in
 * Kubernetes mode), the operator (which reconciles them) and GitOps manifests: resource
 * names, labels, annotations, finalizers and field managers. One module, so the three
 * never disagree on a spelling. Each kind's own names, phases, reasons and status schema
 * are in kinds/<kind>.ts (the CRDs' status schemas are built from them), re-exported here.
 */
import { AUTH_CONNECTION } from './kinds/auth-connection.js';
import { BROWSER_POOL } from './kinds/browser-pool.js';
import { BROWSER_SESSION } from './kinds/browser-session.js';

export * from './kinds/auth-connection.js';
export * from './kinds/browser-pool.js';
export * from './kinds/browser-session.js';
export { conditionSchema, type KindNames } from './kinds/status.js';

export const GROUP = 'browserplane.dev';
export const VERSION = 'v1alpha1';
export const API_VERSION = `${GROUP}/${VERSION}`;

/** Label values allow [A-Za-z0-9_.-], at most 63 characters, alphanumeric at both ends. */
export function labelValue(text: string): string {
  return text.replace(/[^A-Za-z0-9_.-]/g, '_').slice(0, 63).replace(/^[^A-Za-z0-9]+|[^A-Za-z0-9]+$/g, '');
}

export const PLURALS = {
  BrowserSession: BROWSER_SESSION.plural,
  BrowserPool: BROWSER_POOL.plural,
  AuthConnection: AUTH_CONNECTION.plural,
} as const;

/** Labels on resources the API writes (and on their pods): who they belong to. */
export const LABELS = {
  sessionId: 'browserplane.dev/session-id',
  poolId: 'browserplane.dev/pool',
  orgId: 'browserplane.dev/org-id',
  projectId: 'browserplane.dev/project-id',
} as const;

export const ANNOTATIONS = {
  /** 'api' on resources the API wrote; absent on resources applied with kubectl or a GitOps tool. */
  createdBy: 'browserplane.dev/created-by',
  /**
   * 'true' on a BrowserPool being deleted: end its leased browsers at once instead of
   * waiting for their release, as an API DELETE with {"force": true} does.
   */
  forceDelete: 'browserplane.dev/force-delete',
} as const;

/** Held by the operator until what a resource stands for (pod, pool row) is gone. */
export const FINALIZERS = {
  browserSession: 'browserplane.dev/browser',
  browserPool: 'browserplane.dev/drain',
  authConnection: 'browserplane.dev/auth-connection',
} as const;

/** Server-side-apply field managers: the API's writes and the operator's are told apart in managedFields. */
export const FIELD_MANAGERS = {
  api: 'browserplane-api',
  operator: 'browserplane-operator',
} as const;

/**
 * A Kubernetes object name for an API id (`bs_3kq…` → `bs-3kq…`): DNS-1123, reversible
 * because ids are lower-case base32 after one `_`.
 */
export function resourceNameOf(id: string): string {
  return id.toLowerCase().replace(/_/g, '-');
}

/** The API id a resource name stands for (the inverse of resourceNameOf for API ids). */
export function idOfResourceName(name: string): string {
  const at = name.indexOf('-');
  return at < 0 ? name : `${name.slice(0, at)}_${name.slice(at + 1)}`;
}

/** Labels naming a session's owners, as label values allow. */
export function ownerLabels(scope: { orgId: string; projectId: string }): Record<string, string> {
  return { [LABELS.orgId]: labelValue(scope.orgId), [LABELS.projectId]: labelValue(scope.projectId) };
}

/**
 * The launch spec of an API-made BrowserSession travels in a Secret `<resource name>-launch`
 * under the key `spec.json`: it may carry a decrypted proxy password, so never in the
 * resource and never logged.
 */
export const LAUNCH_SECRET_SUFFIX = '-launch';
export const LAUNCH_SPEC_KEY = 'spec.json';
export const launchSecretNameOf = (browserId: string): string => `${resourceNameOf(browserId)}${LAUNCH_SECRET_SUFFIX}`;
