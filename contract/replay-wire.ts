/**
 * The agent's replay routes (agent/src/replay), as both sides read them: the service starts
 * a recording with POST /replays and stops it with POST /replays/{replay_id}/stop; the agent
 * PUTs the finished MP4 to `upload_url` (the service's side door, whose token is the whole
 * authorisation). Limits travel with each start, so the agent needs no settings of its own.
 */
import { z } from 'zod';

export const REPLAY_ID_PATTERN = /^[A-Za-z0-9_-]{1,128}$/;
/** Frame rates the recorder takes: Kernel's bounds without a GPU (above 20 needs one there). */
export const REPLAY_MIN_FRAMERATE = 1;
export const REPLAY_MAX_FRAMERATE = 20;
/** The agent refuses more recordings than this at once, whatever the service allows. */
export const AGENT_MAX_CONCURRENT_REPLAYS = 8;

export const agentReplayStartSchema = z.object({
  replay_id: z.string().regex(REPLAY_ID_PATTERN),
  framerate: z.number().int().min(REPLAY_MIN_FRAMERATE).max(REPLAY_MAX_FRAMERATE),
  /** The recording stops by itself then, and is uploaded. */
  max_duration_s: z.number().int().positive().max(7 * 24 * 3600),
  /** ffmpeg's -fs: the file stops growing there (the recording ends and is uploaded). */
  max_bytes: z.number().int().positive(),
  /** The session's viewport: the video's frame size (a headful display has it already). */
  width: z.number().int().positive().max(10_000),
  height: z.number().int().positive().max(10_000),
  /** Where the finished MP4 goes (PUT, video/mp4); a failure is POSTed to `${upload_url}` with /failure before the query. */
  upload_url: z.string().url(),
});
export type AgentReplayStart = z.infer<typeof agentReplayStartSchema>;

export const agentReplayStartedSchema = z.object({ replay_id: z.string(), started_at: z.string() });
export type AgentReplayStarted = z.infer<typeof agentReplayStartedSchema>;

/** The answer to a stop, once the upload ended (finished) or could not be made (failed). */
export const agentReplayStoppedSchema = z.object({
  replay_id: z.string(),
  status: z.enum(['finished', 'failed']),
  size_bytes: z.number().int().nonnegative().optional(),
  message: z.string().optional(),
});
export type AgentReplayStopped = z.infer<typeof agentReplayStoppedSchema>;

/** The body of the failure side door: why no video came. */
export const replayFailureSchema = z.object({ message: z.string().max(2000).describe('Why the recording has no video') });

/** The failure URL that belongs to an upload URL: `/failure` appended to its path, same token. */
export function replayFailureUrl(uploadUrl: string): string {
  const url = new URL(uploadUrl);
  url.pathname = `${url.pathname.replace(/\/+$/, '')}/failure`;
  return url.toString();
}
