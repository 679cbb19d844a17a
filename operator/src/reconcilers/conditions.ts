/**
 * metav1.Condition, as every reconciler reports it: one type and one builder, so
 * "lastTransitionTime moves only when status flips" holds the same way in each status.
 */

export interface Condition {
  type: string;
  status: 'True' | 'False' | 'Unknown';
  observedGeneration?: number;
  lastTransitionTime: string;
  reason: string;
  message: string;
}

/** What a reconciler decides about a condition; the builder adds the generation and the time. */
export type ConditionValue = Pick<Condition, 'type' | 'status' | 'reason' | 'message'>;

/** Kubernetes times are RFC 3339 with second precision. */
export function kubeTime(date: Date): string {
  return date.toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/**
 * The condition as it should now read. lastTransitionTime moves only when status flips,
 * so "Ready=False since 10:02" keeps meaning since when, whatever reasons came between.
 *
 * `now` is the time of a flip: a Date is written as Kubernetes writes times (kubeTime); a
 * string is written as given (BrowserPool conditions have carried milliseconds from the
 * start, and their readers may compare them).
 */
export function nextCondition(previous: readonly Condition[] | undefined, wanted: ConditionValue, generation: number | undefined, now: Date | string): Condition {
  const before = previous?.find((condition) => condition.type === wanted.type);
  return {
    type: wanted.type,
    status: wanted.status,
    ...(generation !== undefined ? { observedGeneration: generation } : {}),
    lastTransitionTime: before && before.status === wanted.status ? before.lastTransitionTime : typeof now === 'string' ? now : kubeTime(now),
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
