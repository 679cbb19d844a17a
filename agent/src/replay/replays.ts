import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Logger } from 'pino';
import type { AgentReplayStart, AgentReplayStopped } from '../../../contract/replay-wire.js';
import type { RunningChromium } from '../chromium.js';
import { Recording } from './recorder.js';
import { reportReplayFailure, uploadReplay } from './upload.js';

/**
 * The recordings of this agent's browser, by replay id. Each one ends exactly once (a stop,
 * its max duration, ffmpeg's own end, or the session's end), and its ending uploads the
 * file and removes it; a stop that comes later waits for that same ending.
 */

/** The longest an upload may take when nothing shorter is asked for (a stop over HTTP). */
const UPLOAD_TIMEOUT_MS = 120_000;

interface Entry {
  recording: Recording;
  dir: string;
  timer: NodeJS.Timeout;
  /** Carries a token: never logged. */
  uploadUrl: string;
  ending?: Promise<AgentReplayStopped>;
}

export class ReplayTable {
  private readonly entries = new Map<string, Entry>();
  private readonly ended = new Map<string, Promise<AgentReplayStopped>>();

  constructor(private readonly log: Logger) {}

  running(): number {
    return this.entries.size;
  }

  has(replayId: string): boolean {
    return this.entries.has(replayId) || this.ended.has(replayId);
  }

  async start(chromium: RunningChromium, request: AgentReplayStart): Promise<void> {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'browserplane-replay-'));
    const log = this.log.child({ replay_id: request.replay_id });
    let recording: Recording;
    try {
      recording = await Recording.start(
        chromium,
        {
          framerate: request.framerate,
          maxDurationS: request.max_duration_s,
          maxBytes: request.max_bytes,
          output: path.join(dir, 'replay.mp4'),
          viewport: { width: request.width, height: request.height },
        },
        log,
      );
    } catch (error) {
      await rm(dir, { recursive: true, force: true });
      throw error;
    }
    // The max duration ends the recording here too (ffmpeg's -t alone would not upload it).
    const timer = setTimeout(() => void this.end(request, 'max duration reached'), request.max_duration_s * 1000);
    timer.unref();
    this.entries.set(request.replay_id, { recording, dir, timer, uploadUrl: request.upload_url });
    // ffmpeg may end by itself (-fs, a failure): the ending uploads what it wrote.
    void recording.finished.then(() => this.end(request, 'ffmpeg ended'));
  }

  /** Stops the recording (if it still runs) and resolves once its upload ended. */
  stop(replayId: string, deadline?: number): Promise<AgentReplayStopped> | undefined {
    const entry = this.entries.get(replayId);
    if (entry?.ending) return entry.ending;
    return this.ended.get(replayId) ?? (entry ? this.endEntry(replayId, entry, 'stop requested', deadline) : undefined);
  }

  /**
   * The session ends: every recording is finished and uploaded before `deadline` (ms since
   * the epoch). The shutdown goes on at the deadline even if ffmpeg has not finished: the
   * runtime ends the agent's processes soon after anyway.
   */
  async stopAll(deadline: number): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const all = Promise.all([...this.entries.keys()].map((id) => this.stop(id, deadline) ?? Promise.resolve()));
    await Promise.race([all, new Promise((resolve) => (timer = setTimeout(resolve, Math.max(0, deadline - Date.now()))))]);
    clearTimeout(timer);
  }

  private end(request: AgentReplayStart, why: string): void {
    const entry = this.entries.get(request.replay_id);
    if (entry && !entry.ending) void this.endEntry(request.replay_id, entry, why);
  }

  private endEntry(replayId: string, entry: Entry, why: string, deadline?: number): Promise<AgentReplayStopped> {
    entry.ending = this.finish(replayId, entry, why, deadline ?? Date.now() + UPLOAD_TIMEOUT_MS);
    this.ended.set(replayId, entry.ending);
    void entry.ending.finally(() => this.entries.delete(replayId));
    return entry.ending;
  }

  private async finish(replayId: string, entry: Entry, why: string, deadline: number): Promise<AgentReplayStopped> {
    clearTimeout(entry.timer);
    const log = this.log.child({ replay_id: replayId });
    const { uploadUrl } = entry;
    const signal = AbortSignal.timeout(Math.max(1000, deadline - Date.now()));
    try {
      const result = await entry.recording.stop();
      if (!result.ok) {
        await reportReplayFailure(uploadUrl, result.message ?? 'the recording failed', signal);
        return { replay_id: replayId, status: 'failed', message: result.message ?? 'the recording failed' };
      }
      await uploadReplay(uploadUrl, entry.recording.path, result.sizeBytes, signal);
      log.info({ why, size_bytes: result.sizeBytes }, 'replay: recording finished and uploaded');
      return { replay_id: replayId, status: 'finished', size_bytes: result.sizeBytes };
    } catch (error) {
      const message = `the video could not be handed to the service: ${(error as Error).message}`;
      log.error({ err: error, why }, `replay: ${message}`);
      return { replay_id: replayId, status: 'failed', message };
    } finally {
      await rm(entry.dir, { recursive: true, force: true });
    }
  }
}
