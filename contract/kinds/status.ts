/**
 * What every kind's status has: the generation it describes and its conditions, in
 * Kubernetes' own spelling (metav1.Condition).
 */
import { z } from 'zod';

export const conditionSchema = z.strictObject({
  type: z.string().min(1).max(316).describe('Condition type, e.g. Ready'),
  status: z.enum(['True', 'False', 'Unknown']),
  observedGeneration: z.number().int().min(0).optional().describe('The .metadata.generation the condition was computed from'),
  lastTransitionTime: z.string().describe('When status last changed (RFC 3339)'),
  reason: z.string().min(1).max(1024).describe('CamelCase reason code'),
  message: z.string().max(32_768).describe('Human-readable detail'),
});

export const commonStatusFields = {
  observedGeneration: z.number().int().min(0).optional().describe('The .metadata.generation this status describes'),
  conditions: z.array(conditionSchema).optional().describe('Ready and others, one per type'),
};

/** The names a kind is known by in the API server and kubectl. */
export interface KindNames {
  kind: string;
  plural: string;
  singular: string;
  shortNames: string[];
}
