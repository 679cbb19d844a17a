import { z } from 'zod';
import { lookupText, timestamp } from '../../http/schemas.js';

/** The longest window one list or export covers (as Kernel's: split longer periods). */
export const MAX_WINDOW_DAYS = 30;
/** Entries per list page: at most 100, as the SDK's docs say. */
export const MAX_PAGE = 100;
/** Rows per export chunk: the SDK's download helper refuses a chunk claiming more than 50,000. */
export const MAX_CHUNK_ROWS = 50_000;
export const DEFAULT_CHUNK_ROWS = 10_000;

const METHODS = ['POST', 'PUT', 'PATCH', 'DELETE', 'GET', 'HEAD', 'OPTIONS'] as const;
const method = z
  .string()
  .transform((v) => v.toUpperCase())
  .pipe(z.enum(METHODS));

/**
 * A list in a query string: the SDK joins arrays with commas (`exclude_method=GET%2CPOST`);
 * repeated parameters are taken too.
 */
function csvList<T extends z.ZodType>(item: T, max: number) {
  return z.preprocess((value: unknown): unknown[] => {
    const given: unknown[] = Array.isArray(value) ? (value as unknown[]) : [value];
    return given
      .flatMap((v): unknown[] => (typeof v === 'string' ? v.split(',') : [v]))
      .map((v): unknown => (typeof v === 'string' ? v.trim() : v))
      .filter((v) => v !== '');
  }, z.array(item).max(max));
}

const rfc3339 = z.iso.datetime({ offset: true }).transform((v) => new Date(v));

/** The filters list and export share (Kernel's semantics: docs/audit-logs.md). */
export const auditFilterQuery = {
  start: rfc3339.describe('Lower bound (inclusive) of the entries\' timestamp, RFC 3339'),
  end: rfc3339.describe(`Upper bound (exclusive) of the entries' timestamp, RFC 3339; at most ${MAX_WINDOW_DAYS} days after start`),
  method: method.optional().describe('Only calls with this HTTP method'),
  exclude_method: csvList(method, METHODS.length).optional().describe('Leave out calls with these HTTP methods (comma-separated)'),
  search: lookupText
    .optional()
    .describe('Case-insensitive substring of the path, route, user id (key id), key name, email, client IP or status'),
  search_user_id: csvList(lookupText, 100).optional().describe('User ids (API key ids) whose calls are ORed into the search (comma-separated)'),
  auth_strategy: lookupText.optional().describe('Only calls authenticated this way (api_key is the only one here)'),
  service: lookupText.optional().describe('Only calls to this service: the route\'s family in snake case (browsers, proxies, api_keys, browser_pools, …)'),
};

const checkWindow = (q: { start: Date; end: Date }, ctx: z.RefinementCtx) => {
  // zod runs this even when a bound itself was refused (that issue is reported already).
  if (!(q.start instanceof Date) || !(q.end instanceof Date)) return;
  if (q.end.getTime() <= q.start.getTime()) {
    ctx.addIssue({ code: 'custom', path: ['end'], message: 'end must be after start' });
  } else if (q.end.getTime() - q.start.getTime() > MAX_WINDOW_DAYS * 86_400_000) {
    ctx.addIssue({ code: 'custom', path: ['end'], message: `the window may span at most ${MAX_WINDOW_DAYS} days; split longer periods` });
  }
};

export const listAuditLogsQuery = z
  .object({
    ...auditFilterQuery,
    page_token: z.string().min(1).max(200).optional().describe('X-Next-Page-Token of the previous page'),
    limit: z.coerce.number().int().min(1).max(MAX_PAGE).default(MAX_PAGE).describe(`Entries per page, 1 to ${MAX_PAGE} (default ${MAX_PAGE})`),
  })
  .superRefine(checkWindow);

export const exportChunkQuery = z
  .object({
    ...auditFilterQuery,
    cursor: z.string().min(1).max(200).optional().describe('X-Next-Cursor of the previous chunk: the next chunk of older entries'),
    format: z.enum(['jsonl', 'jsonl.gz']).default('jsonl.gz').describe('jsonl (one JSON entry a line) or jsonl.gz (the same, gzip-compressed; the default)'),
    limit: z.coerce
      .number()
      .int()
      .min(1)
      .max(MAX_CHUNK_ROWS)
      .default(DEFAULT_CHUNK_ROWS)
      .describe(`Entries in this chunk, 1 to ${MAX_CHUNK_ROWS} (default ${DEFAULT_CHUNK_ROWS})`),
  })
  .superRefine(checkWindow);

export type AuditFilter = Pick<z.output<typeof listAuditLogsQuery>, keyof typeof auditFilterQuery>;

export const auditLogEntrySchema = z
  .object({
    timestamp: timestamp.describe('UTC time the request was received'),
    method: z.string().describe('HTTP method'),
    path: z.string().describe('Request path, without the query string'),
    route: z.string().describe('Matched route template, e.g. /proxies/{id}'),
    status: z.number().int().describe('HTTP status of the answer (499: the client went away first)'),
    duration_ms: z.number().int().describe('Time to answer, milliseconds'),
    auth_strategy: z.string().describe('How the caller authenticated: api_key'),
    user_id: z.string().describe('Id of the API key that called'),
    email: z.string().describe('Always empty: API keys have no e-mail (their name is key_name)'),
    client_ip: z.string().describe('Address of the client connection'),
    domain: z.string().describe('Request host'),
    user_agent: z.string().describe('User-Agent header'),
    service: z.string().describe('The route\'s family in snake case (browsers, proxies, …)'),
    request_id: z.string().describe('X-Request-Id of the call, as in the service log'),
    resource_id: z.string().nullable().describe('The resource acted on: the first path parameter, or the id a create answered'),
    project_id: z.string().nullable().describe('The project the call acted in; null on org routes or when refused before one was resolved'),
    key_name: z.string().describe('Name of the API key at the time of the call'),
  })
  .meta({ id: 'AuditLogEntry' });

export type AuditLogEntry = z.output<typeof auditLogEntrySchema>;
