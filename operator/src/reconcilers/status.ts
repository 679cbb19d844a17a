/**
 * Status reporting shared by the reconcilers: metav1.Condition helpers and a writer that
 * touches the API server only when the status would change.
 *
 * Writes go through the /status subresource as server-side apply with the operator's
 * field manager: the status the operator applies is the whole truth it owns, so a field
 * it stops sending (agentUrl once the browser failed) is removed, and conditions merge
 * by type (the CRD declares them a list-map) with whatever another manager may add.
 */
import { CustomObjectsApi, PatchStrategy, setHeaderOptions, type KubeConfig } from '@kubernetes/client-node';
import { API_VERSION, FIELD_MANAGERS, GROUP } from '../../../contract/kinds.js';
import { VERSION } from '../k8s/crds.js';

export interface Condition {
  type: string;
  status: 'True' | 'False' | 'Unknown';
  observedGeneration?: number;
  lastTransitionTime: string;
  reason: string;
  message: string;
}

export type ResourceStatus = Record<string, unknown> & { conditions?: Condition[]; observedGeneration?: number };

/** Kubernetes times are RFC 3339 with second precision. */
export function kubeTime(date: Date): string {
  return date.toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/**
 * The condition as it should now read. lastTransitionTime moves only when status flips,
 * so "Ready=False since 10:02" keeps meaning since when, whatever reasons came between.
 */
export function nextCondition(
  previous: readonly Condition[] | undefined,
  wanted: { type: string; status: Condition['status']; reason: string; message: string },
  generation: number | undefined,
  now: Date,
): Condition {
  const before = previous?.find((condition) => condition.type === wanted.type);
  return {
    type: wanted.type,
    status: wanted.status,
    ...(generation !== undefined ? { observedGeneration: generation } : {}),
    lastTransitionTime: before && before.status === wanted.status ? before.lastTransitionTime : kubeTime(now),
    reason: wanted.reason,
    message: wanted.message,
  };
}

/** Replaces the condition of the same type, keeping the others in their order. */
export function withCondition(conditions: readonly Condition[] | undefined, condition: Condition): Condition[] {
  const rest = (conditions ?? []).filter((c) => c.type !== condition.type);
  const at = (conditions ?? []).findIndex((c) => c.type === condition.type);
  if (at < 0) return [...rest, condition];
  return [...rest.slice(0, at), condition, ...rest.slice(at)];
}

/** Structural equality of JSON values, ignoring key order (what the API server round-trips). */
export function sameJson(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a) || Array.isArray(b)) {
    return Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((item, i) => sameJson(item, b[i]));
  }
  if (a === null || b === null || typeof a !== 'object' || typeof b !== 'object') return false;
  const left = Object.entries(a).filter(([, v]) => v !== undefined);
  const right = Object.entries(b).filter(([, v]) => v !== undefined);
  return left.length === right.length && left.every(([key, value]) => sameJson(value, (b as Record<string, unknown>)[key]));
}

export interface ResourceRef {
  kind: string;
  plural: string;
  namespace: string;
  name: string;
}

export interface StatusWriter {
  /** Applies `status` unless it equals `current`; answers whether it wrote. */
  write(ref: ResourceRef, current: ResourceStatus | undefined, status: ResourceStatus): Promise<boolean>;
}

export function statusWriter(config: KubeConfig): StatusWriter {
  const api = config.makeApiClient(CustomObjectsApi);
  return {
    async write(ref, current, status) {
      if (sameJson(current ?? {}, status)) return false;
      await api.patchNamespacedCustomObjectStatus(
        {
          group: GROUP,
          version: VERSION,
          namespace: ref.namespace,
          plural: ref.plural,
          name: ref.name,
          body: { apiVersion: API_VERSION, kind: ref.kind, metadata: { name: ref.name, namespace: ref.namespace }, status },
          fieldManager: FIELD_MANAGERS.operator,
          // The operator is the only writer of these fields; a stale owner must not block it.
          force: true,
        },
        setHeaderOptions('Content-Type', PatchStrategy.ServerSideApply),
      );
      return true;
    },
  };
}
