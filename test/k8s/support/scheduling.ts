/**
 * The two scheduler filters the node agent applies before binding a pod to its node, as
 * kube-scheduler's NodeAffinity (nodeSelector part) and TaintToleration plugins judge them.
 * Node affinity terms, resources and topology are not judged: the test nodes never compete.
 */
import type { V1Pod, V1Taint, V1Toleration } from '@kubernetes/client-node';

export interface NodePlacement {
  labels: Record<string, string>;
  taints: V1Taint[];
}

/** Whether the toleration tolerates the taint (k8s.io/api core/v1 Toleration.ToleratesTaint). */
export function tolerates(toleration: V1Toleration, taint: V1Taint): boolean {
  if (toleration.effect && toleration.effect !== taint.effect) return false;
  // An empty key with Exists tolerates every taint; otherwise the keys must be equal.
  if (toleration.key && toleration.key !== taint.key) return false;
  switch (toleration.operator ?? 'Equal') {
    case 'Exists':
      return true;
    case 'Equal':
      return (toleration.value ?? '') === (taint.value ?? '');
    default:
      return false;
  }
}

/** Why the pod cannot be scheduled onto the node, or undefined when it fits. */
export function misfit(pod: V1Pod, node: NodePlacement): string | undefined {
  const selector = pod.spec?.nodeSelector ?? {};
  const unmatched = Object.entries(selector).filter(([label, value]) => node.labels[label] !== value);
  if (unmatched.length > 0) return `node(s) didn't match Pod's node affinity/selector (${unmatched.map(([label, value]) => `${label}=${value}`).join(', ')})`;
  // PreferNoSchedule is a preference the scheduler scores, not a filter.
  const untolerated = node.taints.filter(
    (taint) => taint.effect !== 'PreferNoSchedule' && !(pod.spec?.tolerations ?? []).some((toleration) => tolerates(toleration, taint)),
  );
  if (untolerated.length > 0) {
    return `node(s) had untolerated taint(s) {${untolerated.map((taint) => `${taint.key}${taint.value ? `=${taint.value}` : ''}:${taint.effect}`).join(', ')}}`;
  }
  return undefined;
}
