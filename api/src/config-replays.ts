import { z } from 'zod';

/**
 * Settings of session recordings (docs/replays.md): where the videos live, how long they
 * are kept, and the bounds of one session's recordings. Spread into config.ts's schema.
 */
const optionalString = z
  .string()
  .optional()
  .transform((v) => (v === undefined || v.trim() === '' ? undefined : v));
const bounded = (max: number) => z.coerce.number().int().min(1).max(max);

export const replayFields = {
  BROWSERPLANE_REPLAY_DIR: optionalString.describe('Where session recordings (MP4) are stored (default: <data dir>/replays)'),
  BROWSERPLANE_REPLAY_RETENTION_DAYS: bounded(3650).default(7).describe('Days a recording is kept after it started; then it is deleted'),
  BROWSERPLANE_REPLAY_MAX_DURATION_SECONDS: bounded(86_400)
    .default(3600)
    .describe('Longest recording, seconds: the default and the cap of max_duration_in_seconds'),
  BROWSERPLANE_REPLAY_MAX_CONCURRENT: bounded(8).default(2).describe('Recordings one browser session may run at once'),
  BROWSERPLANE_REPLAY_MAX_MB: bounded(10_000).default(500).describe('Largest recording, MiB: ffmpeg stops writing there and the recording ends'),
};

export interface ReplaySettings {
  retentionDays: number;
  maxDurationS: number;
  maxConcurrent: number;
  maxBytes: number;
}

export const DEFAULT_REPLAY_SETTINGS: ReplaySettings = { retentionDays: 7, maxDurationS: 3600, maxConcurrent: 2, maxBytes: 500 * 1024 * 1024 };

export function replaySettingsOf(config: { [K in keyof typeof replayFields]: z.output<(typeof replayFields)[K]> }): ReplaySettings {
  return {
    retentionDays: config.BROWSERPLANE_REPLAY_RETENTION_DAYS,
    maxDurationS: config.BROWSERPLANE_REPLAY_MAX_DURATION_SECONDS,
    maxConcurrent: config.BROWSERPLANE_REPLAY_MAX_CONCURRENT,
    maxBytes: config.BROWSERPLANE_REPLAY_MAX_MB * 1024 * 1024,
  };
}
