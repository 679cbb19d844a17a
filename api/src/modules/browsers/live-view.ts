import { z } from 'zod';
import type { AppDeps } from '../../app-deps.js';
import { agentEndpoint, fetchHealth, type AgentEndpoint, type AgentTokens } from '../../../../contract/agent-client.js';
import { AppError, conflict, notFound } from '../../http/errors.js';
import { defineRoute, type RouteDef } from '../../http/route.js';
import { errorResponses } from '../../http/standard-responses.js';
import { createCdpTokens, tokenSubject, type CdpTokens, type TokenCheck } from './cdp-token.js';
import { asksReadOnly, checkLiveViewToken, READ_ONLY_PURPOSE } from './live-view-access.js';
import { readLiveViewAsset } from './live-view-assets.js';
import { LIVE_VIEW_ASSET_PREFIX, LIVE_VIEW_HTML, liveViewPageHeaders } from './live-view-page.js';
import { findLiveSessionById, type SessionRow } from './store.js';

/**
 * browser_live_view_url: a page of the service that shows a headful browser's screen and
 * forwards mouse and keyboard (noVNC over /browsers/{id}/vnc, see cdp-proxy.ts). It is
 * opened in a plain tab or an iframe, so it carries the session's signed token (the one
 * in cdp_ws_url) instead of an API key: public as far as keys go, checked here.
 */

const tags = ['Browsers'];
const LIVE_VIEW_PATH = '/browsers/{session_id}/live';

const params = z.object({ session_id: z.string().min(1).max(128).describe('The browser session') });
const query = z.object({
  // Optional so that a missing token is a 401 like a wrong one, not a validation 400.
  token: z.string().max(256).optional().describe('The token of the session’s cdp_ws_url, or a read-only live view token'),
  readOnly: z
    .string()
    .max(8)
    .optional()
    .describe('true: a view without input (Kernel’s readOnly); answered by a redirect to a read-only token, so it cannot be undone by editing the URL'),
});

const REFUSALS: Record<Exclude<TokenCheck, 'ok'>, [number, string, string]> = {
  malformed: [401, 'unauthorized', 'The live view link has no valid token'],
  expired: [401, 'unauthorized', 'The live view link has expired; read the session again for a fresh browser_live_view_url'],
  bad_signature: [403, 'forbidden', 'The token is not valid for this session'],
};

/** The path of a session's live view page; the caller adds the service's base and the token. */
export const liveViewPath = (sessionId: string) => `/browsers/${encodeURIComponent(sessionId)}/live`;

export function liveViewRoutes(deps: AppDeps): RouteDef[] {
  const tokens = createCdpTokens(deps);
  return [
    defineRoute({
      method: 'get',
      path: LIVE_VIEW_PATH,
      operationId: 'getBrowserLiveView',
      summary: 'The live view page of a headful session (browser_live_view_url)',
      description:
        'An HTML page showing the browser’s screen, forwarding mouse and keyboard. Authorised by the token of cdp_ws_url, ' +
        'not an API key. 409 for a headless session; 404 once the session has ended. With readOnly=true and a full token, ' +
        '303 to the same page under a read-only token: the service then drops all input of that view.',
      tags,
      auth: 'public',
      params,
      query,
      responses: {
        200: { description: 'The page', schema: z.string(), contentType: 'text/html' },
        303: {
          description: 'readOnly=true asked with a full token (or a read-only token without it): the read-only page',
          headers: { Location: { description: 'live?token=<read-only token>&readOnly=true, relative to this page', schema: z.string() } },
        },
        ...errorResponses(401, 403, 404, 409),
      },
      handler: async ({ params: p, query: q, res }) => {
        const { session, readOnly } = await authorizeLiveView(deps, tokens, p.session_id, q.token);
        const asked = asksReadOnly(q.readOnly);
        if (asked !== readOnly || (readOnly && q.readOnly !== 'true')) {
          const token = readOnly ? q.token! : (await tokens.issue(tokenSubject(session), READ_ONLY_PURPOSE)).token;
          res.status(303).set({ Location: `live?token=${encodeURIComponent(token)}&readOnly=true`, 'Cache-Control': 'no-store', 'Referrer-Policy': 'no-referrer' }).end();
          return { kind: 'handled' };
        }
        res.status(200).set(liveViewPageHeaders(deps.settings.liveViewFrameAncestors)).send(LIVE_VIEW_HTML);
        return { kind: 'handled' };
      },
    }),
    defineRoute({
      method: 'get',
      path: `${LIVE_VIEW_ASSET_PREFIX}/*path`,
      operationId: 'getLiveViewAsset',
      summary: 'Scripts and style of the live view page (noVNC 1.7.0 under novnc/)',
      tags,
      auth: 'public',
      responses: {
        200: { description: 'The file', schema: z.string(), contentType: ['text/javascript', 'text/css'] },
        ...errorResponses(404),
      },
      handler: async ({ req, res }) => {
        const segments = (req.params as Record<string, string[] | string | undefined>).path;
        const asset = await readLiveViewAsset(Array.isArray(segments) ? segments : [String(segments ?? '')]);
        res
          .status(200)
          .set({ 'Content-Type': asset.contentType, 'Cache-Control': asset.cacheControl, 'X-Content-Type-Options': 'nosniff' })
          .send(asset.body);
        return { kind: 'handled' };
      },
    }),
  ];
}

/** Token first, so an outsider learns nothing about which sessions exist. */
async function authorizeLiveView(
  deps: AppDeps,
  tokens: CdpTokens,
  sessionId: string,
  token: string | undefined,
): Promise<{ session: SessionRow; readOnly: boolean }> {
  const session = await findLiveSessionById(deps.db, sessionId);
  const access = await checkLiveViewToken(tokens, session ? tokenSubject(session) : sessionId, token ?? '');
  if (access.check !== 'ok') throw new AppError(...REFUSALS[access.check]);
  if (!session) throw notFound('Browser session', sessionId);
  if (session.headless) throw conflict('live_view_unavailable', 'A headless session has no screen to show; live view needs headless: false');
  return { session, readOnly: access.readOnly };
}

const HEALTH_TIMEOUT_MS = 2_000;

/**
 * CONTRACT: a viewport change is refused while a live view is open unless force=true,
 * because the person watching would see the screen jump under them. The agent counts
 * live view clients itself (whichever way they reached it), so its /health is asked.
 * An agent that does not answer is not a live view: the change itself then fails.
 */
export async function refuseResizeWhileWatched(session: Pick<SessionRow, 'id' | 'headless' | 'agent_url'>, tokens: AgentTokens): Promise<void> {
  if (session.headless || !session.agent_url) return;
  const viewers = await liveViewers(agentEndpoint(tokens, session.id, session.agent_url));
  if (viewers > 0) {
    throw conflict(
      'live_view_active',
      `A live view of this browser is open (${viewers} viewer${viewers === 1 ? '' : 's'}); send viewport.force=true to resize anyway`,
    );
  }
}

async function liveViewers(agent: AgentEndpoint): Promise<number> {
  return (await fetchHealth(agent, HEALTH_TIMEOUT_MS))?.connections_by_kind?.live_view ?? 0;
}
