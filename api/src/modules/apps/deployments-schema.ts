import { z } from 'zod';
import { paginationQuery } from '../../http/pagination.js';
import { labelSchema, lookupText, timestamp } from '../../http/schemas.js';
import { sinceQuery } from '../invocations/since.js';
import { DEPLOYMENT_STATUSES, type DeploymentRow } from './deployments-store.js';

/** The one region the SDK's types allow; every app runs here whatever it is called. */
export const APP_REGION = 'aws.us-east-1a';

const status = z.enum(DEPLOYMENT_STATUSES).describe('queued, in_progress, running, failed or stopped');

// eslint-disable-next-line no-control-regex -- refusing control characters is the point
const relativePath = z.string().min(1).max(1024).regex(/^[^\u0000-\u001f\\]*$/u, 'must not contain control characters or backslashes');

const gitSource = z.strictObject({
  type: z.literal('github').describe('github: any git URL the service can reach (https, or a local repository where allowed)'),
  url: z.string().min(1).max(2048),
  // eslint-disable-next-line no-control-regex -- refusing control characters is the point
  ref: z.string().min(1).max(255).regex(/^[^\s\u0000-\u001f~^:?*[\\]+$/u, 'must be a branch, tag or commit').refine((ref) => !ref.startsWith('-'), 'must not start with -'),
  entrypoint: relativePath.describe('The entrypoint, relative to path (or the repository root)'),
  path: relativePath.optional().describe('Subdirectory of the repository the app lives in'),
  auth: z.strictObject({ method: z.literal('github_token'), token: z.string().min(1).max(4096) }).optional(),
});

export type GitSource = z.output<typeof gitSource>;

const envVars = z
  .record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]{0,254}$/, 'must be an environment variable name'), z.string().max(32 * 1024))
  .refine((vars) => Object.keys(vars).length <= 200, 'at most 200 variables');

/**
 * The multipart fields of POST /deployments, as text (the form carries no types): what
 * the route validates after busboy has read them. `source` is the JSON the SDK writes
 * for an object without files.
 */
export const deploymentFormSchema = z
  .strictObject({
    entrypoint_rel_path: relativePath.optional(),
    version: labelSchema.default('latest'),
    force: z.enum(['true', 'false']).default('false').transform((v) => v === 'true'),
    region: z.literal(APP_REGION).optional().describe(`${APP_REGION} is the only region`),
    source: z
      .string()
      .transform((text, ctx) => {
        try {
          return JSON.parse(text) as unknown;
        } catch {
          ctx.addIssue({ code: 'custom', message: 'must be a JSON object' });
          return z.NEVER;
        }
      })
      .pipe(gitSource)
      .optional(),
    env_vars: envVars,
    file: z.literal(true).optional(),
  })
  .superRefine((form, ctx) => {
    if (form.file && form.source) ctx.addIssue({ code: 'custom', path: ['source'], message: 'send either a file or a source, not both' });
    if (!form.file && !form.source) ctx.addIssue({ code: 'custom', path: ['file'], message: 'send a file (a .js/.ts file or a zip) or a source' });
    if (form.file && form.entrypoint_rel_path === undefined) ctx.addIssue({ code: 'custom', path: ['entrypoint_rel_path'], message: 'is required with a file' });
  });

export type DeploymentForm = z.output<typeof deploymentFormSchema>;

/** POST /deployments as JSON: a git source (a file needs multipart). */
export const deploymentJsonSchema = z
  .strictObject({
    source: gitSource,
    version: labelSchema.default('latest'),
    force: z.boolean().default(false),
    region: z.literal(APP_REGION).optional().describe(`${APP_REGION} is the only region`),
    env_vars: envVars.default({}),
  })
  .meta({ id: 'CreateDeploymentFromSource' });

export const deploymentIdParams = z.object({ id: lookupText.describe('Deployment id') });

export const listDeploymentsQuery = z.object({
  ...paginationQuery,
  app_name: lookupText.optional().describe('Only deployments whose build registered this app'),
  app_version: lookupText.optional().describe('Only deployments of this version'),
  query: lookupText.optional().describe('Matches the id (exact or prefix), or a substring of an app name'),
});

export const followDeploymentQuery = z.object({
  since: sinceQuery.optional().describe('Replay events from this instant (RFC 3339 or a duration such as 5m); default: from the start'),
});

export const deploymentSchema = z
  .object({
    id: z.string(),
    created_at: timestamp,
    region: z.literal(APP_REGION),
    status,
    entrypoint_rel_path: z.string(),
    env_vars: z.record(z.string(), z.string()).describe('The names of the variables; each value is redacted to ""'),
    source_type: z.enum(['file', 'github']),
    source_checksum: z.string().optional().describe('sha256 of the upload, or the commit built'),
    source_url: z.string().optional(),
    source_ref: z.string().optional(),
    source_path: z.string().optional(),
    status_reason: z.string().optional().describe('Why it failed or stopped; a failed build ends with its log tail'),
    updated_at: timestamp.nullable(),
  })
  .meta({ id: 'Deployment' });

/**
 * env_vars as every route and event answers them: each key with an empty value. Kernel
 * does the same for "API key, OAuth, and managed-auth callers" (only its dashboard
 * sessions see values; the SDK's doc comments) and every caller here is one of those. The
 * values are often secrets; the app gets them, the API never gives them back.
 */
export function redactEnvVars(vars: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.keys(vars).map((key) => [key, '']));
}

export function presentDeployment(row: DeploymentRow) {
  return {
    id: row.id,
    created_at: row.created_at.toISOString(),
    region: APP_REGION,
    status: row.status,
    entrypoint_rel_path: row.entrypoint_rel_path,
    env_vars: redactEnvVars(row.env_vars),
    source_type: row.source_type,
    ...(row.source_checksum !== null ? { source_checksum: row.source_checksum } : {}),
    ...(row.source_url !== null ? { source_url: row.source_url } : {}),
    ...(row.source_ref !== null ? { source_ref: row.source_ref } : {}),
    ...(row.source_path !== null ? { source_path: row.source_path } : {}),
    ...(row.status_reason !== null ? { status_reason: row.status_reason } : {}),
    updated_at: row.updated_at.toISOString(),
  };
}

const action = z.object({ name: z.string() }).loose();

export const appSchema = z
  .object({
    id: z.string(),
    app_name: z.string(),
    version: z.string(),
    actions: z.array(action),
    deployment: z.string().describe('The deployment whose build registered it'),
    env_vars: z.record(z.string(), z.string()),
    region: z.literal(APP_REGION),
  })
  .meta({ id: 'App' });

export const listAppsQuery = z.object({
  ...paginationQuery,
  app_name: lookupText.optional().describe('Only this app'),
  version: lookupText.optional().describe('Only this version'),
  query: lookupText.optional().describe('Matches the id (exact or prefix), or a substring of the app name or version'),
});

export const deploymentEventSchema = z
  .union([
    z.object({ event: z.literal('log'), message: z.string(), timestamp }),
    z.object({ event: z.literal('deployment_state'), deployment: deploymentSchema, timestamp }),
    z.object({
      event: z.literal('app_version_summary'),
      id: z.string(),
      app_name: z.string(),
      version: z.string(),
      actions: z.array(action),
      env_vars: z.record(z.string(), z.string()),
      region: z.literal(APP_REGION),
      timestamp,
    }),
    z.object({ event: z.literal('sse_heartbeat'), timestamp }),
    z.object({ event: z.literal('error'), error: z.object({ code: z.string(), message: z.string() }), timestamp }),
  ])
  .describe('The JSON object in each data line of the stream')
  .meta({ id: 'DeploymentEvent' });
