import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { z } from 'zod';
import type { AppDeps } from '../../app-deps.js';
import type { AppServices } from '../../app-services.js';
import { defineRoute, json, noContent, type RouteDef } from '../../http/route.js';
import { errorResponses } from '../../http/standard-responses.js';
import { createCdpTokens } from './cdp-token.js';
import { authorizeArchiveAccess, PROFILE_ARCHIVE_PATH, saveUploadedProfile } from './profile-archive.js';

const tags = ['Internal'];

const params = z.object({ session_id: z.string().min(1).max(128).describe('The browser session') });
const query = z.object({
  // Optional here so that a missing token is a 401 like a wrong one, not a validation 400.
  token: z.string().max(256).optional().describe('The agent’s profile token from its launch spec (purpose "profile")'),
});

/**
 * The agent's side door for profiles (see profile-archive.ts). Public as far as API keys
 * go: the token in the query is checked by the handler, and the request log records the
 * path only, never the token.
 */
export function profileArchiveRoutes(deps: AppDeps, services: AppServices): RouteDef[] {
  const tokens = createCdpTokens(deps);
  return [
    defineRoute({
      method: 'get',
      path: PROFILE_ARCHIVE_PATH,
      operationId: 'internalGetSessionProfile',
      summary: 'Internal, for the browser agent: the session’s stored profile as a tar',
      description: '204 when the profile holds nothing yet. Authorised by the session’s profile token alone.',
      tags,
      auth: 'public',
      params,
      query,
      responses: {
        200: { description: 'The stored user-data dir', schema: z.string().meta({ format: 'binary' }), contentType: 'application/x-tar' },
        204: { description: 'Nothing stored yet' },
        ...errorResponses(401, 403, 404),
      },
      handler: async ({ params: p, query: q, res, log }) => {
        const { session, profile } = await authorizeArchiveAccess(deps, tokens, { sessionId: p.session_id, token: q.token, access: 'read' });
        const tar = await deps.profileStore.exportTar({ orgId: profile.org_id, projectId: profile.project_id, profileId: profile.id });
        if (!tar) return noContent();
        res.status(200);
        res.setHeader('Content-Type', 'application/x-tar');
        res.setHeader('Cache-Control', 'no-store');
        try {
          await pipeline(tar, res);
        } catch (error) {
          // Headers are out: cutting the connection is how the agent learns the tar is not whole.
          log.warn({ err: error, sessionId: session.id, profileId: profile.id }, 'sending a profile to its browser failed mid-stream');
          res.destroy();
        }
        return { kind: 'handled' };
      },
    }),
    defineRoute({
      method: 'put',
      path: PROFILE_ARCHIVE_PATH,
      operationId: 'internalPutSessionProfile',
      summary: 'Internal, for the browser agent: save the session’s user-data dir into its profile',
      description:
        'Only for a live session that loaded the profile with save_changes. The tar is refused whole (400) if any entry is ' +
        'an absolute path, contains "..", is a link leaving the profile, a hard link or a device; 413 past the size caps.',
      tags,
      auth: 'public',
      params,
      query,
      bodyType: 'raw',
      responses: {
        200: { description: 'Saved', schema: z.object({ size_bytes: z.number().int(), updated_at: z.string() }) },
        ...errorResponses(400, 401, 403, 404, 413),
      },
      handler: async ({ params: p, query: q, req, log }) => {
        const { session, profile } = await authorizeArchiveAccess(deps, tokens, { sessionId: p.session_id, token: q.token, access: 'write' });
        const saved = await saveUploadedProfile(deps, profile, req as Readable);
        log.info({ sessionId: session.id, profileId: profile.id, sizeBytes: saved.sizeBytes }, 'profile saved from its browser session');
        // Pools that refresh on this profile rebuild their idle browsers with the new save.
        await services.pools
          .profileSaved(profile.id)
          .catch((error: unknown) => log.error({ err: error, profileId: profile.id }, 'refreshing the pools of a saved profile failed'));
        return json({ size_bytes: saved.sizeBytes, updated_at: saved.updatedAt.toISOString() });
      },
    }),
  ];
}
