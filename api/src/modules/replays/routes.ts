import { pipeline } from 'node:stream/promises';
import { z } from 'zod';
import type { AppDeps } from '../../app-deps.js';
import { notFound } from '../../http/errors.js';
import { defineRoute, json, noContent, type RouteDef } from '../../http/route.js';
import { errorResponses } from '../../http/standard-responses.js';
import { projectScopeOf } from '../../scope.js';
import { browserIdParams } from '../browsers/index.js';
import { presentReplay, replayParams, replaySchema, replayStartBody } from './schema.js';
import { finishedReplay, listReplays, startReplay, stopReplay } from './service.js';

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
      handler: async ({ params, auth }) => json((await listReplays(deps, projectScopeOf(auth), params.id_or_name)).map(presentReplay)),
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
      description: '409 replay_in_progress while it records, 409 replay_failed when it has no video.',
      tags,
      auth: 'project',
      params: replayParams,
      responses: {
        200: { description: 'The video', schema: z.string().meta({ format: 'binary' }), contentType: 'video/mp4' },
        ...errorResponses(404, 409),
      },
      handler: async ({ params, auth, res, log }) => {
        const row = await finishedReplay(deps, projectScopeOf(auth), params.id_or_name, params.replay_id);
        const video = await deps.replayStore.open({ orgId: row.org_id, projectId: row.project_id, replayId: row.id });
        if (!video) throw notFound('Replay', row.id);
        res.status(200);
        res.setHeader('Content-Type', 'video/mp4');
        res.setHeader('Content-Length', String(video.sizeBytes));
        res.setHeader('Content-Disposition', `attachment; filename="${row.id}.mp4"`);
        res.setHeader('Cache-Control', 'no-store');
        try {
          await pipeline(video.stream, res);
        } catch (error) {
          // Headers are out: cutting the connection is how the client learns the video is not whole.
          log.warn({ err: error, replayId: row.id }, 'replay download ended early');
          res.destroy();
        }
        return { kind: 'handled' };
      },
    }),
  ];
}
