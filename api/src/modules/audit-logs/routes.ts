import { z } from 'zod';
import type { AppDeps } from '../../app-deps.js';
import { PAGINATION_HEADERS } from '../../http/pagination.js';
import { defineRoute, json, type RouteDef } from '../../http/route.js';
import { errorResponses } from '../../http/standard-responses.js';
import { orgScopeOf } from '../../scope.js';
import { auditLogEntrySchema, exportChunkQuery, listAuditLogsQuery } from './schema.js';
import { exportAuditChunk, listAuditLogs } from './service.js';

const tags = ['Audit logs'];

const PAGE_HEADERS = ['X-Next-Page-Token', 'X-Has-More'];
const CHUNK_HEADERS = ['X-Next-Cursor', 'X-Has-More', 'X-Row-Count', 'X-Content-Sha256'];
/** Browsers may read the headers the SDK pages by (app.ts exposes the offset pager's). */
const exposing = (names: string[]) => ({ 'Access-Control-Expose-Headers': [...new Set([...PAGINATION_HEADERS, ...names, 'X-Request-Id'])].join(', ') });

const hasMoreHeader = { description: 'true when more entries follow', schema: z.enum(['true', 'false']) };

/**
 * The org's audit log (docs/audit-logs.md). Org routes: the log spans every project and
 * the org's own calls (projects, API keys), so a project-scoped key gets 403
 * org_key_required, as on the other org resources.
 */
export function auditLogRoutes(deps: AppDeps): RouteDef[] {
  return [
    defineRoute({
      method: 'get',
      path: '/audit-logs',
      operationId: 'listAuditLogs',
      summary: 'Search the org\'s audit log, newest first',
      description: 'Every state-changing call by an API key of the org, in a window of at most 30 days. Page with page_token from X-Next-Page-Token.',
      tags,
      auth: 'org',
      query: listAuditLogsQuery,
      responses: {
        200: {
          description: 'A page of entries',
          schema: auditLogEntrySchema.array(),
          headers: {
            'X-Has-More': hasMoreHeader,
            'X-Next-Page-Token': { description: 'page_token of the next page; absent on the last', schema: z.string() },
          },
        },
        ...errorResponses(400, 401, 403),
      },
      handler: async ({ query, auth }) => {
        const page = await listAuditLogs(deps, orgScopeOf(auth), query, { value: query.page_token, field: 'page_token' }, query.limit);
        return json(page.entries, 200, {
          'X-Has-More': String(page.next !== undefined),
          ...(page.next ? { 'X-Next-Page-Token': page.next } : {}),
          ...exposing(PAGE_HEADERS),
        });
      },
    }),
    defineRoute({
      method: 'get',
      path: '/audit-logs/export/chunk',
      operationId: 'exportAuditLogChunk',
      summary: 'Download one chunk of the org\'s audit log as JSON Lines',
      description:
        'Entries newest first, one JSON object a line, gzip-compressed for jsonl.gz (the default). X-Content-Sha256 is the SHA-256 of the bytes sent; ' +
        'follow X-Next-Cursor while X-Has-More is true. Chunks of jsonl.gz written one after another make one valid .jsonl.gz file.',
      tags,
      auth: 'org',
      query: exportChunkQuery,
      responses: {
        200: {
          description: 'The chunk',
          contentType: ['application/gzip', 'application/jsonl'],
          headers: {
            'X-Has-More': hasMoreHeader,
            'X-Next-Cursor': { description: 'cursor of the next chunk; absent on the last', schema: z.string() },
            'X-Row-Count': { description: 'Entries in this chunk', schema: z.string().regex(/^\d+$/) },
            'X-Content-Sha256': { description: 'Hex SHA-256 of the body bytes', schema: z.string().regex(/^[0-9a-f]{64}$/) },
          },
        },
        ...errorResponses(400, 401, 403),
      },
      handler: async ({ query, auth, res }) => {
        const chunk = await exportAuditChunk(deps, orgScopeOf(auth), query, query);
        res.status(200).set({
          'Content-Type': query.format === 'jsonl.gz' ? 'application/gzip' : 'application/jsonl',
          'Content-Disposition': `attachment; filename="audit-logs.${query.format}"`,
          'Cache-Control': 'no-store',
          'X-Has-More': String(chunk.next !== undefined),
          ...(chunk.next ? { 'X-Next-Cursor': chunk.next } : {}),
          'X-Row-Count': String(chunk.rows),
          'X-Content-Sha256': chunk.sha256,
          ...exposing(CHUNK_HEADERS),
        });
        res.end(chunk.body);
        return { kind: 'handled' };
      },
    }),
  ];
}
