import { z } from 'zod';
import type { AppDeps } from '../../app-deps.js';
import { defineRoute, json, noContent, type RouteDef } from '../../http/route.js';
import { errorResponses } from '../../http/standard-responses.js';
import { projectScopeOf } from '../../scope.js';
import { browserIdParams } from '../browsers/index.js';
import { presentReplay, replayParams, replaySchema, replayStartBody } from './schema.js';
import { finishedReplay, listReplays, startReplay, stopReplay } from './service.js';
import { sendReplayVideo } from './video-response.js';
import { replayViewUrls } from './view.js';

/** browsers.replays (CONTRACT §2.4): start, stop, list, download. docs/replays.md. */

const tags = ['Replays'];

export function replayRoutes(deps: AppDeps): RouteDef[] {
  return [
    defineRoute({
      method: 'get',
      path: '/browsers/{id_or_name}/replays',
      operationId: 'listReplays',
      summary: 'The recordings of a browser session, oldest first',
      description: 'Also after the session ended (until each recording expires: BROWSERPLANE_REPLAY_RETENTION_DAYS).',
      tags,
      auth: 'project',
      params: browserIdParams,
      responses: { 200: { description: 'Bare array of recordings', schema: z.array(replaySchema) }, ...errorResponses(404) },
      handler: async ({ params, auth, req }) => {
        const rows = await listReplays(deps, projectScopeOf(auth), params.id_or_name);
        const viewUrl = replayViewUrls(deps, req);
        return json(await Promise.all(rows.map(async (row) => presentReplay(row, await viewUrl(row)))));
      },
    }),
    defineRoute({
      method: 'post',
      path: '/browsers/{id_or_name}/replays',
      operationId: 'startReplay',
      summary: 'Start recording the browser as an MP4 (H.264)',
      description:
        'Headful browsers are recorded from their display, headless ones from their page (CDP screencast), at the viewport size. ' +
        'At most BROWSERPLANE_REPLAY_MAX_CONCURRENT recordings at once per session (409 replay_limit_reached).',
      tags,
      auth: 'project',
      params: browserIdParams,
      body: replayStartBody,
      responses: { 200: { description: 'The recording', schema: replaySchema }, ...errorResponses(400, 404, 409, 429, 502, 503) },
      // A new recording has no video yet, so no replay_view_url: list once it is stopped.
      handler: async ({ params, body, auth }) => json(presentReplay(await startReplay(deps, projectScopeOf(auth), params.id_or_name, body))),
    }),
    defineRoute({
      method: 'post',
      path: '/browsers/{id_or_name}/replays/{replay_id}/stop',
      operationId: 'stopReplay',
      summary: 'Stop a recording; answers once its video is stored',
      description: 'A recording that is not running is a 400 replay_not_recording, as Kernel answers.',
      tags,
      auth: 'project',
      params: replayParams,
      responses: { 204: { description: 'Stopped and stored' }, ...errorResponses(400, 404, 409, 502) },
      handler: async ({ params, auth }) => {
        await stopReplay(deps, projectScopeOf(auth), params.id_or_name, params.replay_id);
        return noContent();
      },
    }),
    defineRoute({
      method: 'get',
      path: '/browsers/{id_or_name}/replays/{replay_id}',
      operationId: 'downloadReplay',
      summary: 'Download a finished recording (video/mp4)',
      description: 'Honours one Range: bytes=… (206). 409 replay_in_progress while it records, 409 replay_failed when it has no video.',
      tags,
      auth: 'project',
      params: replayParams,
      responses: {
        200: { description: 'The video', schema: z.string().meta({ format: 'binary' }), contentType: 'video/mp4' },
        206: { description: 'The byte range asked for in a Range header', schema: z.string().meta({ format: 'binary' }), contentType: 'video/mp4' },
        416: { description: 'The Range lies past the end of the video' },
        ...errorResponses(404, 409),
      },
      handler: async ({ params, auth, req, res, log }) => {
        const row = await finishedReplay(deps, projectScopeOf(auth), params.id_or_name, params.replay_id);
        await sendReplayVideo(deps, row, { req, res, log, disposition: 'attachment' });
        return { kind: 'handled' };
      },
    }),
  ];
}
