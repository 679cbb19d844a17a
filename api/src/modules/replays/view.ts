import type { IncomingMessage } from 'node:http';
import { z } from 'zod';
import type { AppDeps } from '../../app-deps.js';
import { AppError, notFound } from '../../http/errors.js';
import { defineRoute, type RouteDef } from '../../http/route.js';
import { errorResponses } from '../../http/standard-responses.js';
import { createCdpTokens, type CdpTokens, type TokenCheck } from '../browsers/index.js';
import { publicWsBase } from '../browsers/present.js';
import { findReplayById, type ReplayRow } from './store.js';
import { sendReplayVideo } from './video-response.js';
import { REPLAY_VIEW_PAGE_HEADERS, REPLAY_VIEW_VIDEO_HEADERS, replayViewHtml } from './view-page.js';

/**
 * replay_view_url: a page of the service that plays one stored recording, opened in a
 * plain tab, so it carries a token instead of an API key (the live view's pattern). The
 * token (purpose "replay_view", an hour, renewed by every list) is bound to the replay id:
 * it opens that replay's page and video and nothing else. Only finished recordings get a
 * URL; the routes check the token before they look at the replay, so an outsider learns
 * nothing about which replays exist.
 */

const tags = ['Replays'];
const params = z.object({ replay_id: z.string().min(1).max(128).describe('The recording') });
const query = z.object({
  // Optional so that a missing token is a 401 like a wrong one, not a validation 400.
  token: z.string().max(256).optional().describe('The token of the replay’s replay_view_url'),
});

const REFUSALS: Record<Exclude<TokenCheck, 'ok'>, [number, string, string]> = {
  malformed: [401, 'unauthorized', 'The replay link has no valid token'],
  expired: [401, 'unauthorized', 'The replay link has expired; list the replays again for a fresh replay_view_url'],
  bad_signature: [403, 'forbidden', 'The token is not valid for this replay'],
};

const viewPath = (replayId: string) => `/replays/${encodeURIComponent(replayId)}/view`;

/** Mints replay_view_url for the rows of one answer; undefined for a replay with no video. */
export function replayViewUrls(deps: AppDeps, req: IncomingMessage): (row: ReplayRow) => Promise<string | undefined> {
  const tokens = createCdpTokens(deps);
  const base = publicWsBase(deps, req).replace(/^ws/, 'http');
  return async (row) => {
    if (row.status !== 'finished') return undefined;
    const { token } = await tokens.issue(row.id, 'replay_view');
    return `${base}${viewPath(row.id)}?token=${token}`;
  };
}

async function authorizeView(deps: AppDeps, tokens: CdpTokens, replayId: string, token: string | undefined): Promise<ReplayRow> {
  const check = await tokens.verify(replayId, token ?? '', 'replay_view');
  if (check !== 'ok') throw new AppError(...REFUSALS[check]);
  const row = await findReplayById(deps.db, replayId);
  // Gone once its retention passed (the sweep deletes row and video).
  if (!row) throw notFound('Replay', replayId);
  if (row.status === 'recording') throw new AppError(409, 'replay_in_progress', 'The recording is still running', { shouldRetry: false });
  if (row.status === 'failed') throw new AppError(409, 'replay_failed', 'The recording failed and has no video', { shouldRetry: false });
  return row;
}

export function replayViewRoutes(deps: AppDeps): RouteDef[] {
  const tokens = createCdpTokens(deps);
  return [
    defineRoute({
      method: 'get',
      path: '/replays/{replay_id}/view',
      operationId: 'getReplayView',
      summary: 'A page that plays a stored recording (replay_view_url)',
      description: 'Authorised by the token of replay_view_url, not an API key. 404 once the recording expired.',
      tags,
      auth: 'public',
      params,
      query,
      responses: { 200: { description: 'The page', schema: z.string(), contentType: 'text/html' }, ...errorResponses(401, 403, 404, 409) },
      handler: async ({ params: p, query: q, res }) => {
        const row = await authorizeView(deps, tokens, p.replay_id, q.token);
        res.status(200).set(REPLAY_VIEW_PAGE_HEADERS).send(replayViewHtml(row.id, q.token!));
        return { kind: 'handled' };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/replays/{replay_id}/video',
      operationId: 'getReplayViewVideo',
      summary: 'The video the replay view page plays (video/mp4, Range requests honoured)',
      tags,
      auth: 'public',
      params,
      query,
      responses: {
        200: { description: 'The video', schema: z.string().meta({ format: 'binary' }), contentType: 'video/mp4' },
        206: { description: 'The byte range asked for', schema: z.string().meta({ format: 'binary' }), contentType: 'video/mp4' },
        416: { description: 'The Range lies past the end of the video' },
        ...errorResponses(401, 403, 404, 409),
      },
      handler: async ({ params: p, query: q, req, res, log }) => {
        const row = await authorizeView(deps, tokens, p.replay_id, q.token);
        await sendReplayVideo(deps, row, { req, res, log, disposition: 'inline', headers: REPLAY_VIEW_VIDEO_HEADERS });
        return { kind: 'handled' };
      },
    }),
  ];
}
