import type { Readable } from 'node:stream';
import { z } from 'zod';
import type { AppDeps } from '../../app-deps.js';
import { AppError } from '../../http/errors.js';
import { defineRoute, json, noContent, type RouteDef } from '../../http/route.js';
import { errorResponses } from '../../http/standard-responses.js';
import { ReplayTooLargeError } from '../../ports/replay-store.js';
import { replayFailureSchema } from '../../../../contract/replay-wire.js';
import { createCdpTokens, type CdpTokens, type TokenCheck } from '../browsers/index.js';
import { settingsOf } from './service.js';
import { findRecordingReplay, markEnded, type ReplayRow } from './store.js';

/**
 * The agent's side door for recordings: it PUTs the finished MP4 here, or POSTs why there
 * is none. Public as far as API keys go: the token in the query (purpose "replay", bound to
 * the replay id, handed to the agent in the start request) is the whole authorisation, and
 * it is honoured only while the replay is recording, so it works once. The request log
 * records the path only, never the token.
 */

const tags = ['Internal'];
const params = z.object({ replay_id: z.string().min(1).max(128).describe('The recording') });
const query = z.object({
  // Optional so that a missing token is a 401 like a wrong one, not a validation 400.
  token: z.string().max(256).optional().describe('The upload token of the start request (purpose "replay")'),
});

const REFUSALS: Record<Exclude<TokenCheck, 'ok'>, [number, string, string]> = {
  malformed: [401, 'unauthorized', 'The token is missing or malformed'],
  expired: [401, 'unauthorized', 'The token has expired'],
  bad_signature: [403, 'forbidden', 'The token is not valid for this recording'],
};

async function authorize(deps: AppDeps, tokens: CdpTokens, replayId: string, token: string | undefined): Promise<ReplayRow> {
  const check = await tokens.verify(replayId, token ?? '', 'replay');
  if (check !== 'ok') throw new AppError(...REFUSALS[check]);
  const row = await findRecordingReplay(deps.db, replayId);
  if (!row) throw new AppError(404, 'replay_not_recording', 'The recording has ended or does not exist');
  return row;
}

export function replaySideDoorRoutes(deps: AppDeps): RouteDef[] {
  const tokens = createCdpTokens(deps);
  return [
    defineRoute({
      method: 'put',
      path: '/internal/replays/{replay_id}/video',
      operationId: 'internalPutReplayVideo',
      summary: 'Internal, for the browser agent: the finished recording',
      description: 'Only while the replay is recording; 413 past BROWSERPLANE_REPLAY_MAX_MB.',
      tags,
      auth: 'public',
      params,
      query,
      bodyType: 'raw',
      responses: { 200: { description: 'Stored', schema: z.object({ size_bytes: z.number().int() }) }, ...errorResponses(401, 403, 404, 413) },
      handler: async ({ params: p, query: q, req, log }) => {
        const row = await authorize(deps, tokens, p.replay_id, q.token);
        const ref = { orgId: row.org_id, projectId: row.project_id, replayId: row.id };
        let sizeBytes: number;
        try {
          ({ sizeBytes } = await deps.replayStore.save(ref, req as Readable, settingsOf(deps).maxBytes));
        } catch (error) {
          if (!(error instanceof ReplayTooLargeError)) throw error;
          await markEnded(deps.db, row.id, { status: 'failed', at: deps.clock.now(), failure: error.message });
          throw new AppError(413, 'replay_too_large', error.message);
        }
        if (!(await markEnded(deps.db, row.id, { status: 'finished', at: deps.clock.now(), sizeBytes }))) {
          // Ended meanwhile (the sweep gave up on it): its file must not outlive the row's verdict.
          await deps.replayStore.delete(ref);
          throw new AppError(404, 'replay_not_recording', 'The recording has ended or does not exist');
        }
        log.info({ replayId: row.id, sessionId: row.session_id, sizeBytes }, 'replay stored');
        return json({ size_bytes: sizeBytes });
      },
    }),
    defineRoute({
      method: 'post',
      path: '/internal/replays/{replay_id}/video/failure',
      operationId: 'internalReplayFailed',
      summary: 'Internal, for the browser agent: the recording failed, no video will come',
      tags,
      auth: 'public',
      params,
      query,
      body: replayFailureSchema,
      responses: { 204: { description: 'Recorded as failed' }, ...errorResponses(401, 403, 404) },
      handler: async ({ params: p, query: q, body, log }) => {
        const row = await authorize(deps, tokens, p.replay_id, q.token);
        await markEnded(deps.db, row.id, { status: 'failed', at: deps.clock.now(), failure: body.message });
        log.warn({ replayId: row.id, sessionId: row.session_id, reason: body.message }, 'replay failed in its browser');
        return noContent();
      },
    }),
  ];
}
