import type { V1PodSpec, V1Toleration } from '@kubernetes/client-node';
import { z } from 'zod';

/**
 * Where a pod the product creates may go, as settings take it (the operator's browser pods,
 * the API's app Jobs): the fields of a PodSpec an admin sets, checked strictly.
 */

/**
 * A Kubernetes Toleration, strictly: a misspelt field would otherwise be dropped by the API
 * server, and the pod would sit Pending away from the tainted nodes it was meant for.
 */
export const tolerationSchema = z.strictObject({
  key: z.string().optional(),
  operator: z.enum(['Exists', 'Equal']).optional(),
  value: z.string().optional(),
  effect: z.enum(['NoSchedule', 'PreferNoSchedule', 'NoExecute']).optional(),
  tolerationSeconds: z.number().int().optional(),
});

export const podPlacementFields = {
  imagePullSecrets: z.array(z.object({ name: z.string() })).nullish(),
  nodeSelector: z.record(z.string(), z.string()).nullish(),
  tolerations: z.array(tolerationSchema).nullish(),
  runtimeClassName: z.string().nullish(),
  /** A PriorityClass, so the scheduler may preempt lesser pods for these (or these for greater ones). */
  priorityClassName: z.string().nullish(),
};

function parseWith<T extends z.ZodType>(schema: T, text: string, context: z.RefinementCtx): z.infer<T> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    context.addIssue({ code: 'custom', message: 'not JSON' });
    return z.NEVER;
  }
  const result = schema.safeParse(parsed);
  if (!result.success) {
    for (const issue of result.error.issues) context.addIssue({ code: 'custom', message: `${issue.path.join('.') || '(root)'}: ${issue.message}` });
    return z.NEVER;
  }
  return result.data;
}

/** A required setting holding JSON that `schema` checks. */
export const jsonOf = <T extends z.ZodType>(schema: T) => z.string().transform((text, context): z.infer<T> => parseWith(schema, text, context));

/** An optional setting holding JSON that `schema` checks; unset or blank is undefined. */
export const jsonSetting = <T extends z.ZodType>(schema: T) =>
  z
    .string()
    .optional()
    .transform((text, context): z.infer<T> | undefined => (text === undefined || text.trim() === '' ? undefined : parseWith(schema, text, context)));

/** The placement fields of a pod spec; empty values leave the field out. */
export function podPlacement(options: {
  imagePullSecrets?: readonly { name: string }[] | null | undefined;
  nodeSelector?: Record<string, string> | null | undefined;
  tolerations?: readonly V1Toleration[] | null | undefined;
  runtimeClassName?: string | null | undefined;
  priorityClassName?: string | null | undefined;
}): Partial<V1PodSpec> {
  const { imagePullSecrets, nodeSelector, tolerations, runtimeClassName, priorityClassName } = options;
  return {
    ...(imagePullSecrets?.length ? { imagePullSecrets: imagePullSecrets.map(({ name }) => ({ name })) } : {}),
    ...(nodeSelector && Object.keys(nodeSelector).length > 0 ? { nodeSelector: { ...nodeSelector } } : {}),
    ...(tolerations?.length ? { tolerations: tolerations.map((toleration) => ({ ...toleration })) } : {}),
    ...(runtimeClassName ? { runtimeClassName } : {}),
    ...(priorityClassName ? { priorityClassName } : {}),
  };
}
