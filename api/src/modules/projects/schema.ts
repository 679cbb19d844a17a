import { z } from 'zod';
import { paginationQuery } from '../../http/pagination.js';
import { lookupText } from '../../http/schemas.js';

const projectName = z
  .string()
  .trim()
  .min(1)
  .refine((s) => [...s].length <= 255, 'must be at most 255 characters')
  // eslint-disable-next-line no-control-regex -- refusing control characters is the point
  .regex(/^[^\u0000-\u001f\u007f-\u009f]*$/u, 'must not contain control characters')
  .describe('Project name, 1 to 255 characters, unique in the organisation (case- and accent-insensitive)');

export const projectStatus = z.enum(['active', 'archived']);

export const createProjectBody = z.strictObject({ name: projectName }).meta({ id: 'CreateProjectRequest' });

export const updateProjectBody = z
  .strictObject({ name: projectName.optional(), status: projectStatus.optional().describe('active or archived') })
  .meta({ id: 'UpdateProjectRequest' });

export const projectIdParams = z.object({ id: lookupText.describe('Project id or name') });

export const listProjectsQuery = z.object({
  ...paginationQuery,
  name: lookupText.optional().describe('Exact name, case- and accent-insensitive'),
  query: lookupText.optional().describe('Substring of the name, or an exact id'),
});

export const projectSchema = z
  .object({
    id: z.string(),
    name: z.string(),
    status: projectStatus,
    created_at: z.string(),
    updated_at: z.string(),
  })
  .meta({ id: 'Project' });

const MAX_CAP = 100000;
const cap = (what: string) =>
  z
    .number()
    .int()
    .min(0)
    .max(MAX_CAP)
    .nullable()
    .optional()
    .describe(`${what}; 0 or null removes the cap, an absent field stays as it is`);

export const updateLimitsBody = z
  .strictObject({
    max_concurrent_sessions: cap('Concurrent browser sessions, pooled ones included'),
    max_concurrent_invocations: cap('Concurrent invocations'),
    max_pooled_sessions: cap('Browsers held in pools (deprecated)'),
  })
  .meta({ id: 'UpdateProjectLimitsRequest' });

export const projectLimitsSchema = z
  .object({
    max_concurrent_sessions: z.number().int().nullable(),
    max_concurrent_invocations: z.number().int().nullable(),
    max_pooled_sessions: z.number().int().nullable(),
  })
  .meta({ id: 'ProjectLimits' });

export const updateOrgLimitsBody = z
  .strictObject({
    default_project_max_concurrent_sessions: cap(
      'Cap for projects without their own max_concurrent_sessions; at most the org limit',
    ),
  })
  .meta({ id: 'UpdateOrgLimitsRequest' });

export const orgLimitsSchema = z
  .object({
    max_concurrent_sessions: z.number().int().describe('The organisation’s limit (read-only, set by the operator)'),
    default_project_max_concurrent_sessions: z.number().int().nullable(),
    concurrent_sessions_used: z.number().int().describe('Live browser sessions of the organisation, leased pool browsers included'),
    concurrent_sessions_available: z.number().int().describe('max_concurrent_sessions minus concurrent_sessions_used, at least 0'),
    auth_connections_used: z.number().int().describe('Auth connections of the organisation, every project counted'),
    max_auth_connections: z.null().describe('Always null: no org-wide cap on auth connections'),
    min_health_check_interval_seconds: z.number().int().describe('Shortest health_check_interval an auth connection may ask for'),
    vaults_used: z.number().int().describe('Always 0: vaults do not exist on this service'),
    max_vaults: z.number().int().describe('Always 0: vaults do not exist on this service'),
  })
  .meta({ id: 'OrgLimits' });
