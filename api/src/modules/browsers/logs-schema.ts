import { z } from 'zod';
import { LOG_SOURCES, SUPERVISOR_PROCESSES, supervisorProcessOf } from '../../../../contract/agent-logs.js';
import type { ErrorDetail } from '../../http/errors.js';
import { queryBoolean, timestamp } from '../../http/schemas.js';

/**
 * GET /browsers/{id}/logs/stream's query and frames (CONTRACT.md §2.4, the SDK's
 * LogStreamParams and LogEvent). The agent checks the query again (agent/src/logs/http.ts).
 */

export const logStreamQuery = z.object({
  source: z.enum(LOG_SOURCES).describe('"path": a file of the browser filesystem; "supervisor": the output of the browser\'s own processes'),
  follow: queryBoolean
    .optional()
    .describe('true (default): after the lines kept, every new line until the client closes the stream or the browser ends; false: the lines kept, then the end'),
  path: z
    .string()
    .min(1)
    .max(4096)
    .regex(/^\//, 'must be an absolute path (start with "/")')
    .optional()
    .describe('With source=path only (and then required): absolute path of the file inside the browser filesystem'),
  supervisor_process: z
    .string()
    .max(100)
    .refine((name) => name === '' || supervisorProcessOf(name) !== undefined, `unknown process; one of ${SUPERVISOR_PROCESSES.join(', ')}`)
    .optional()
    .describe(`With source=supervisor only: one of ${SUPERVISOR_PROCESSES.join(', ')} (kernel-images-api is taken for agent); absent: every process, each line prefixed with [name]`),
});

type LogStreamQuery = z.output<typeof logStreamQuery>;

/**
 * What goes with which source. Checked once the session is found in the caller's project,
 * not by the schema: a key of another project must get the 404 of a browser it cannot
 * see whatever it asks of it (the authorisation matrix sends the required fields only).
 */
export function logQueryIssues(query: LogStreamQuery): ErrorDetail[] {
  const issue = (field: string, message: string): ErrorDetail => ({ code: 'custom', field: `query.${field}`, message: `query.${field}: ${message}` });
  const issues: ErrorDetail[] = [];
  if (query.source === 'path' && query.path === undefined) issues.push(issue('path', 'path is required with source=path'));
  if (query.source !== 'path' && query.path !== undefined) issues.push(issue('path', 'path goes with source=path only'));
  if (query.source !== 'supervisor' && query.supervisor_process) issues.push(issue('supervisor_process', 'supervisor_process goes with source=supervisor only'));
  return issues;
}

export const logEventSchema = z
  .object({
    event: z.literal('log').describe('Always "log" (an in-stream failure is an "error" frame, then the end)'),
    message: z.string().describe('One line, without its newline; a line longer than 16 KiB by default is cut and ends with " …[line cut]"'),
    timestamp: timestamp.describe('When the agent read the line'),
    process: z.enum(SUPERVISOR_PROCESSES).optional().describe('source=supervisor: the process that wrote the line'),
  })
  .meta({ id: 'LogEvent' });
