import { z } from 'zod';
import { REPLAY_MAX_FRAMERATE, REPLAY_MIN_FRAMERATE } from '../../../../contract/replay-wire.js';
import { browserIdParams } from '../browsers/index.js';

/** The wire of browsers.replays (CONTRACT §2.4, SDK resources/browsers/replays.d.ts). */

export const DEFAULT_FRAMERATE = 10;

export const replayStartBody = z
  .object({
    framerate: z
      .number()
      .int()
      .min(REPLAY_MIN_FRAMERATE)
      .max(REPLAY_MAX_FRAMERATE)
      .optional()
      .describe(`Frames per second, ${REPLAY_MIN_FRAMERATE}-${REPLAY_MAX_FRAMERATE} (default ${DEFAULT_FRAMERATE}; above 20 needs a GPU, which this service has not)`),
    max_duration_in_seconds: z
      .number()
      .int()
      .positive()
      .optional()
      .describe('The recording stops by itself after this many seconds (default and cap: BROWSERPLANE_REPLAY_MAX_DURATION_SECONDS)'),
    record_audio: z.boolean().optional().describe('Only false is served: browsers here have no audio device (true is a 400)'),
  })
  .strict()
  .meta({ id: 'ReplayStartRequest' });

export const replaySchema = z
  .object({
    replay_id: z.string().describe('The recording'),
    started_at: z.string().nullable().optional().describe('When it started (RFC 3339)'),
    finished_at: z.string().nullable().optional().describe('When it ended (RFC 3339); null while recording'),
    replay_view_url: z
      .string()
      .optional()
      .describe('A page that plays the video in a browser, no API key needed (its token: one hour, this replay only); absent until the video is stored'),
  })
  .meta({ id: 'Replay' });

export const replayParams = browserIdParams.extend({
  replay_id: z.string().min(1).max(128).describe('The recording'),
});

export function presentReplay(row: { id: string; started_at: Date; finished_at: Date | null }, viewUrl?: string): z.infer<typeof replaySchema> {
  return {
    replay_id: row.id,
    started_at: row.started_at.toISOString(),
    finished_at: row.finished_at?.toISOString() ?? null,
    ...(viewUrl ? { replay_view_url: viewUrl } : {}),
  };
}
