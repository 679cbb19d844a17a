import { z } from 'zod';
import type { AppDeps } from '../../app-deps.js';
import { AppError } from '../../http/errors.js';
import { defineRoute, json, type RouteDef } from '../../http/route.js';
import { errorResponses } from '../../http/standard-responses.js';
import { telemetryIngestBodySchema } from '../../../../contract/telemetry.js';
import { createCdpTokens, TELEMETRY_INGEST_PATH } from '../browsers/index.js';
import { appendEvents, INGEST_GRACE_MS } from './service.js';
import { findIngestSession } from './store.js';

const params = z.object({ session_id: z.string().min(1).max(128).describe('The browser session') });
const query = z.object({
  // Optional so that a missing token is a 401 like a wrong one, not a validation 400.
  token: z.string().max(256).optional().describe('The agent’s telemetry token from its launch spec or settings (purpose "telemetry")'),
});

const REFUSALS: Record<'malformed' | 'expired' | 'bad_signature', [number, string, string]> = {
  malformed: [401, 'unauthorized', 'The token is missing or malformed'],
  expired: [401, 'unauthorized', 'The token has expired'],
  bad_signature: [403, 'forbidden', 'The token is not valid for this session’s telemetry'],
};

/**
 * The agent's side door for telemetry (agent/src/telemetry/sink.ts POSTs its batches here).
 * Public as far as API keys go: the token (purpose "telemetry", bound to the session) is
 * the whole authorisation, checked here, and the request log records the path only. A
 * session that ended more than INGEST_GRACE_MS ago takes nothing more (410).
 */
export function telemetryIngestRoutes(deps: AppDeps): RouteDef[] {
  const tokens = createCdpTokens(deps);
  return [
    defineRoute({
      method: 'post',
      path: TELEMETRY_INGEST_PATH,
      operationId: 'internalPostSessionTelemetry',
      summary: 'Internal, for the browser agent: a batch of the session’s telemetry events',
      description: 'Events of categories the session does not have on are dropped (counted in refused). Authorised by the session’s telemetry token alone.',
      tags: ['Internal'],
      auth: 'public',
      params,
      query,
      body: telemetryIngestBodySchema,
      responses: {
        200: { description: 'Stored', schema: z.object({ stored: z.number().int(), refused: z.number().int() }) },
        ...errorResponses(400, 401, 403, 404, 410),
      },
      handler: async ({ params: p, query: q, body, log }) => {
        const check = await tokens.verify(p.session_id, q.token ?? '', 'telemetry');
        if (check !== 'ok') throw new AppError(...REFUSALS[check]);
        const session = await findIngestSession(deps.db, p.session_id);
        if (!session) throw new AppError(404, 'browser_not_found', 'The browser session does not exist');
        if (session.deleted_at !== null && deps.clock.now().getTime() - session.deleted_at.getTime() > INGEST_GRACE_MS) {
          throw new AppError(410, 'browser_ended', 'The browser session has ended');
        }
        if (body.dropped > 0) log.warn({ sessionId: session.id, dropped: body.dropped }, 'the agent dropped telemetry events while the API was unreachable');
        const result = await appendEvents(deps, session, body.events);
        return json(result);
      },
    }),
  ];
}
