import { z } from 'zod';
import type { AppDeps } from '../../app-deps.js';
import type { Queryable } from '../../db/pool.js';
import { AppError, notFound } from '../../http/errors.js';
import { defineRoute, type RouteDef } from '../../http/route.js';
import { errorResponses } from '../../http/standard-responses.js';
import type { ExtensionTarget } from '../../../../contract/launch-spec.js';
import { findExtension, markExtensionsUsed, readExtensionArchive } from '../extensions/index.js';
import { createCdpTokens, type CdpTokens } from './cdp-token.js';
import { findLiveSessionById, type Scope } from './store.js';

/**
 * How a session's uploaded extensions reach its browser: the launch spec lists each with
 * an archive URL, and the agent GETs the zip there before Chromium starts (the profile
 * side door's pattern, profile-archive.ts). The URL's token (purpose "extension") signs the
 * session id and the extension id together, so it opens that one extension for that one
 * session, and only while the session is live.
 */

export const EXTENSION_ARCHIVE_PATH = '/internal/browsers/{session_id}/extensions/{extension_id}';

const subjectOf = (sessionId: string, extensionId: string) => `${sessionId}/${extensionId}`;

function internalBase(deps: Pick<AppDeps, 'settings'>): string {
  const base = deps.settings.internalUrl;
  if (!base) {
    throw new AppError(503, 'extension_transfer_unavailable', 'This service cannot hand extensions to its browsers: its internal address is not known yet', {
      shouldRetry: false,
    });
  }
  return base.replace(/\/+$/, '');
}

type Selector = { id?: string | undefined; name?: string | undefined };

/**
 * The create's extensions, found in the project (404 naming the first missing one) and
 * marked used, with the archive URLs the agent fetches them from. Each is unpacked under
 * its name, else its id; the same extension twice is loaded once.
 */
export async function resolveSessionExtensions(deps: AppDeps, tx: Queryable, request: { scope: Scope; sessionId: string; selectors: Selector[] }): Promise<ExtensionTarget[]> {
  if (request.selectors.length === 0) return [];
  const base = internalBase(deps);
  const tokens = createCdpTokens(deps);
  const targets = new Map<string, ExtensionTarget>();
  for (const selector of request.selectors) {
    const key = (selector.id ?? selector.name)!;
    const row = await findExtension(tx, request.scope, key);
    if (!row) throw notFound('Extension', key);
    if (targets.has(row.id)) continue;
    const { token } = await tokens.issue(subjectOf(request.sessionId, row.id), 'extension');
    const archiveUrl = `${base}/internal/browsers/${encodeURIComponent(request.sessionId)}/extensions/${encodeURIComponent(row.id)}?token=${token}`;
    targets.set(row.id, { id: row.id, name: row.name ?? row.id, archiveUrl });
  }
  await markExtensionsUsed(tx, [...targets.keys()], deps.clock.now());
  return [...targets.values()];
}

async function authorize(deps: AppDeps, tokens: CdpTokens, request: { sessionId: string; extensionId: string; token: string | undefined }) {
  const check = await tokens.verify(subjectOf(request.sessionId, request.extensionId), request.token ?? '', 'extension');
  if (check === 'malformed' || check === 'expired') throw new AppError(401, 'unauthorized', check === 'expired' ? 'The token has expired' : 'The token is missing or malformed');
  if (check !== 'ok') throw new AppError(403, 'forbidden', 'The token is not valid for this session’s extension');
  const session = await findLiveSessionById(deps.db, request.sessionId);
  if (!session) throw new AppError(404, 'browser_not_found', 'The browser session has ended or does not exist');
  const zip = await readExtensionArchive(deps.db, { orgId: session.org_id, projectId: session.project_id }, request.extensionId);
  if (!zip) throw notFound('Extension', request.extensionId);
  return zip;
}

/** The agent's side door: public as far as API keys go; the token in the query is checked by the handler. */
export function extensionArchiveRoutes(deps: AppDeps): RouteDef[] {
  const tokens = createCdpTokens(deps);
  return [
    defineRoute({
      method: 'get',
      path: EXTENSION_ARCHIVE_PATH,
      operationId: 'internalGetSessionExtension',
      summary: 'Internal, for the browser agent: an extension of the session as its zip',
      description: 'Authorised by the extension token of the session’s launch spec alone.',
      tags: ['Internal'],
      auth: 'public',
      params: z.object({
        session_id: z.string().min(1).max(128).describe('The browser session'),
        extension_id: z.string().min(1).max(128).describe('The extension'),
      }),
      query: z.object({ token: z.string().max(256).optional().describe('The agent’s extension token from its launch spec (purpose "extension")') }),
      responses: { 200: { description: 'The zip', schema: z.string().meta({ format: 'binary' }), contentType: 'application/zip' }, ...errorResponses(401, 403, 404) },
      handler: async ({ params, query, res }) => {
        const zip = await authorize(deps, tokens, { sessionId: params.session_id, extensionId: params.extension_id, token: query.token });
        res.status(200).setHeader('Content-Type', 'application/zip');
        res.setHeader('Cache-Control', 'no-store');
        res.end(zip);
        return { kind: 'handled' };
      },
    }),
  ];
}
