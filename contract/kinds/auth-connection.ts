/**
 * The AuthConnection kind: a profile kept logged in to a site, applied with kubectl or
 * GitOps; the API's flow engine logs in, the operator reports the auth state back. The
 * status vocabularies are the public API's too (api/src/modules/auth-connections).
 */
import { z } from 'zod';
import { commonStatusFields, type KindNames } from './status.js';

export const AUTH_CONNECTION = { kind: 'AuthConnection', plural: 'authconnections', singular: 'authconnection', shortNames: ['authconn'] } as const satisfies KindNames;

export const FLOW_STATUSES = ['IN_PROGRESS', 'SUCCESS', 'FAILED', 'EXPIRED', 'CANCELED'] as const;
export const FLOW_STEPS = ['DISCOVERING', 'AWAITING_INPUT', 'AWAITING_EXTERNAL_ACTION', 'SUBMITTING', 'COMPLETED'] as const;
export const FLOW_TYPES = ['LOGIN', 'REAUTH'] as const;
export const CONNECTION_STATUSES = ['AUTHENTICATED', 'NEEDS_AUTH'] as const;

export const AUTH_CONDITION_TYPES = { ready: 'Ready' } as const;

/** Reasons of an AuthConnection's Ready condition. */
export const AUTH_READY_REASONS = {
  authenticated: 'Authenticated',
  needsAuth: 'NeedsAuth',
  loginInProgress: 'LoginInProgress',
  invalidSpec: 'InvalidSpec',
  nameConflict: 'NameConflict',
  projectNotFound: 'ProjectNotFound',
} as const;

// Auth state only: never the hosted page URL (it carries a hand-off code), nor anything of the credential.
export const authConnectionStatusSchema = z.strictObject({
  ...commonStatusFields,
  connectionId: z.string().optional().describe('The auth connection’s id in the API'),
  project: z.string().optional().describe('The id of the project the connection belongs to'),
  status: z.enum(CONNECTION_STATUSES).optional().describe('Whether the profile is logged in'),
  flowStatus: z.enum(FLOW_STATUSES).optional().describe('Status of the newest login or re-auth flow'),
  flowStep: z.enum(FLOW_STEPS).optional().describe('Step of the newest flow (COMPLETED once it ended)'),
  flowType: z.enum(FLOW_TYPES).optional().describe('LOGIN or REAUTH: what the newest flow was'),
  lastAuthCheckAt: z.string().optional().describe('When a login or health check last established the auth status (RFC 3339)'),
  canReauth: z.boolean().optional().describe('Whether a re-login could run with nobody watching'),
  canReauthReason: z.string().optional().describe('Why canReauth is what it is'),
});
