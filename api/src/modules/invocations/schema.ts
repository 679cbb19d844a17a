import { z } from 'zod';
import { paginationQuery } from '../../http/pagination.js';
import { labelSchema, lookupText } from '../../http/schemas.js';
import { sinceQuery } from './since.js';

export const INVOCATION_STATUSES = ['queued', 'running', 'succeeded', 'failed'] as const;
export type InvocationStatus = (typeof INVOCATION_STATUSES)[number];
export const TERMINAL_STATUSES: readonly InvocationStatus[] = ['succeeded', 'failed'];

const status = z.enum(INVOCATION_STATUSES).describe('queued, running, succeeded or failed');

function isJsonText(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

const jsonText = (what: string) =>
  z.string().refine(isJsonText, { message: 'must be valid JSON text' }).describe(`${what}, as JSON text`);

export const createInvocationBody = z
  .strictObject({
    app_name: labelSchema.describe('Name of the application'),
    action_name: labelSchema.describe('Name of the action to invoke'),
    version: labelSchema.describe('Version label of the application'),
    async: z
      .boolean()
      .optional()
      .describe('true: answer 202 with status queued at once. Otherwise 200 once a deployed app\'s run ends (or its wait does); queued for an app not deployed here'),
    async_timeout_seconds: z
      .number()
      .int()
      .min(10)
      .max(3600)
      .optional()
      .describe('Timeout of an async invocation in seconds, 10 to 3600; only with async true'),
    payload: jsonText('Input of the action').optional(),
  })
  .superRefine((body, ctx) => {
    if (body.async_timeout_seconds !== undefined && body.async !== true) {
      ctx.addIssue({
        code: 'custom',
        path: ['async_timeout_seconds'],
        message: 'applies only to async invocations (async: true)',
      });
    }
  })
  .meta({ id: 'CreateInvocationRequest' });

export const updateInvocationBody = z
  .strictObject({
    status: z
      .enum(['succeeded', 'failed', 'running'])
      .describe('succeeded or failed finishes the invocation (failed also cancels it); running (an extension) marks a queued one as started'),
    output: jsonText('Output of the action').optional(),
  })
  .superRefine((body, ctx) => {
    if (body.status === 'running' && body.output !== undefined) {
      ctx.addIssue({ code: 'custom', path: ['output'], message: 'is set only when the invocation finishes' });
    }
  })
  .meta({ id: 'UpdateInvocationRequest' });

export const invocationIdParams = z.object({ id: lookupText.describe('Invocation id') });

export const listInvocationsQuery = z.object({
  ...paginationQuery,
  app_name: lookupText.optional().describe('Only this application'),
  action_name: lookupText.optional().describe('Only this action'),
  version: lookupText.optional().describe('Only this application version'),
  deployment_id: lookupText.optional().describe('Only invocations of this deployment'),
  status: status.optional().describe('Only invocations in this state: queued, running, succeeded or failed'),
  since: sinceQuery
    .optional()
    .describe('Only invocations started at or after this instant: RFC 3339 timestamp or a duration back from now (30s, 5m, 2h, 1d)'),
  query: lookupText.optional().describe('Matches the id (exact or prefix), or a substring of the app or action name'),
});

export const followInvocationQuery = z.object({
  since: sinceQuery
    .optional()
    .describe('Log lines at or after this instant (RFC 3339 or a duration back from now); without it, all of them'),
});

const timestamp = z.string().describe('RFC 3339 timestamp');

export const invocationSchema = z
  .object({
    id: z.string(),
    app_name: z.string(),
    action_name: z.string(),
    version: z.string(),
    status,
    started_at: timestamp,
    finished_at: timestamp.nullable().describe('When it finished; null while queued or running'),
    payload: z.string().optional().describe('Input, as JSON text; absent when none was given'),
    output: z.string().optional().describe('Output, as JSON text; absent until set'),
    status_reason: z.string().optional(),
  })
  .meta({ id: 'Invocation' });

export const invocationCreatedSchema = z
  .object({
    id: z.string(),
    action_name: z.string(),
    status,
    output: z.string().optional(),
    status_reason: z.string().optional(),
  })
  .meta({ id: 'InvocationCreated' });

export const invocationEventSchema = z
  .union([
    z.object({ event: z.literal('log'), message: z.string().describe("A line of the run's stdout or stderr"), timestamp }),
    z.object({ event: z.literal('invocation_state'), invocation: invocationSchema, timestamp }),
    z.object({ event: z.literal('sse_heartbeat'), timestamp }),
    z.object({ event: z.literal('error'), error: z.object({ code: z.string(), message: z.string() }), timestamp }),
  ])
  .describe('The JSON object in each data line of the stream')
  .meta({ id: 'InvocationEvent' });

export const invocationBrowsersSchema = z
  .object({
    browsers: z
      .array(z.object({ session_id: z.string() }).loose())
      .describe('Active browser sessions created with this invocation_id'),
  })
  .meta({ id: 'InvocationBrowsers' });

export type CreateInvocationInput = z.output<typeof createInvocationBody>;
export type UpdateInvocationInput = z.output<typeof updateInvocationBody>;
export type ListInvocationsQuery = z.output<typeof listInvocationsQuery>;
