/**
 * Status reporting shared by the reconcilers: a writer that touches the API server only
 * when the status would change (the conditions it carries are built in conditions.ts).
 *
 * Writes go through the /status subresource as server-side apply with the operator's
 * field manager: the status the operator applies is the whole truth it owns, so a field
 * it stops sending (agentUrl once the browser failed) is removed, and conditions merge
 * by type (the CRD declares them a list-map) with whatever another manager may add.
 */
import { CustomObjectsApi, PatchStrategy, setHeaderOptions, type KubeConfig } from '@kubernetes/client-node';
import { API_VERSION, FIELD_MANAGERS, GROUP } from '../../../contract/kinds.js';
import { VERSION } from '../k8s/crds.js';
import type { Condition } from './conditions.js';

// The condition builder lives in conditions.ts; these stay reachable here for the
// reconcilers that still import them from status.ts (auth-connection-plan.ts).

export type ResourceStatus = Record<string, unknown> & { conditions?: Condition[]; observedGeneration?: number };

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
