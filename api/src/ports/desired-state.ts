/**
 * The DesiredState port: where the API records what should exist, and where observed
 * status comes back from. Two adapters fill it:
 *
 * - postgres (embedded mode): desired rows in Postgres; the in-process reconcilers read
 *   them and NOTIFY carries changes.
 * - kubernetes: BrowserSession, BrowserPool and AuthConnection custom resources; the
 *   operator reconciles them and writes status back to Postgres.
 *
 * Postgres stays the system of record for everything the API returns (lists, filters,
 * leases); this port only carries intent to the reconcilers and status back. Reconcilers
 * are level-triggered: a change notification carries a key, never the object, and the
 * reader fetches fresh state.
 */

export type ResourceKind = 'BrowserSession' | 'BrowserPool' | 'AuthConnection';

/** Identifies one desired object. `name` is the stable object name (the API id). */
export interface ResourceRef {
  kind: ResourceKind;
  orgId: string;
  projectId: string;
  name: string;
}

export interface DesiredObject<Spec> {
  ref: ResourceRef;
  /** Bumped on every spec change; status reports the generation it observed. */
  generation: number;
  spec: Spec;
  /** Set once deletion was requested; the object disappears when cleanup finishes. */
  deletion: { requestedAt: Date; force: boolean } | null;
}

/** A condition as Kubernetes writes them, so both adapters report status alike. */
export interface Condition {
  type: string;
  status: 'True' | 'False' | 'Unknown';
  reason: string;
  message: string;
  observedGeneration: number;
  lastTransitionTime: Date;
}

export interface ObservedStatus {
  observedGeneration: number;
  phase: string;
  conditions: Condition[];
  /** Kind-specific status fields (endpoints of a session, counts of a pool, …). */
  fields: Record<string, unknown>;
}

export interface DesiredState {
  /** Creates or replaces the spec of an object; returns its new generation. */
  apply<Spec>(ref: ResourceRef, spec: Spec): Promise<{ generation: number }>;
  /** Asks for the object's deletion; force terminates what is in use (leased browsers). */
  requestDeletion(ref: ResourceRef, options: { force: boolean }): Promise<void>;
  get<Spec>(ref: ResourceRef): Promise<DesiredObject<Spec> | undefined>;
  list<Spec>(kind: ResourceKind): Promise<Array<DesiredObject<Spec>>>;
  /** Records what a reconciler observed; written only when it changed. */
  reportStatus(ref: ResourceRef, status: ObservedStatus): Promise<void>;
  /**
   * Calls `onChange` with the ref of every object of `kind` whose spec, deletion or status
   * changed, and once for every object at start (a relist). Returns a stop function.
   */
  watch(kind: ResourceKind, onChange: (ref: ResourceRef) => void): () => Promise<void>;
}
