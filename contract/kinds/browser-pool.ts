/** The BrowserPool kind: a pool of warm browsers applied with kubectl or GitOps, kept as a pool row by the operator. */
import { z } from 'zod';
import { commonStatusFields, type KindNames } from './status.js';

export const BROWSER_POOL = { kind: 'BrowserPool', plural: 'browserpools', singular: 'browserpool', shortNames: ['bpool'] } as const satisfies KindNames;

export const POOL_CONDITION_TYPES = { ready: 'Ready', draining: 'Draining' } as const;

/** Reasons of a BrowserPool's Ready condition. */
export const POOL_READY_REASONS = {
  filling: 'Filling',
  full: 'Full',
  invalidSpec: 'InvalidSpec',
  projectNotFound: 'ProjectNotFound',
  nameConflict: 'NameConflict',
  draining: 'Draining',
} as const;

/** Reasons of a BrowserPool's Draining condition (present only once the resource is being deleted). */
export const POOL_DRAINING_REASONS = {
  leasesHeld: 'LeasesHeld',
  deleting: 'Deleting',
} as const;

export const browserPoolStatusSchema = z.strictObject({
  ...commonStatusFields,
  poolId: z.string().optional().describe('The pool’s id in the API'),
  project: z.string().optional().describe('The id of the project the pool belongs to'),
  size: z.number().int().optional().describe('Browsers the pool keeps warm'),
  availableCount: z.number().int().optional().describe('Idle browsers ready to be acquired'),
  acquiredCount: z.number().int().optional().describe('Browsers leased out'),
  startingCount: z.number().int().optional().describe('Browsers still starting: the fill in progress'),
  replicas: z.number().int().optional().describe('Browsers the pool holds now, idle and leased (the scale subresource\'s status.replicas)'),
  selector: z.string().optional().describe('Label selector of the pool\'s browser pods (the scale subresource\'s selector)'),
});
