import { spawn, type ChildProcess } from 'node:child_process';
import { stat } from 'node:fs/promises';
import type { Logger } from 'pino';
import type { RunningChromium } from '../chromium.js';
import { ffmpegArgs, type ReplayEncoding, type ReplaySource } from './ffmpeg-args.js';
import { ScreencastFeed } from './screencast.js';

/**
 * One recording: ffmpeg writing an MP4, fed by the display (headful) or the screencast
 * (headless). Ends when stopped, at its max duration or size (ffmpeg's -t and -fs), or
 * when ffmpeg fails; `finished` then says whether a playable file exists.
 */

/** How long ffmpeg may take to write the file's end after it was asked to stop. */
const FINISH_TIMEOUT_MS = 20_000;

export interface RecordingResult {
  ok: boolean;
  sizeBytes: number;
  message?: string;
}

export class Recording {
  readonly finished: Promise<RecordingResult>;
  private feed?: ScreencastFeed;
  private stopRequested = false;

  private constructor(
    private readonly child: ChildProcess,
    private readonly output: string,
    private readonly log: Logger,
  ) {
    let stderr = '';
    child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (stderr = (stderr + chunk).slice(-2000)));
    // ffmpeg leaves early on -fs or -t while frames are still written: not an error of ours.
    child.stdin!.on('error', () => undefined);
    this.finished = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
      child.once('error', (error) => {
        stderr += `\n${error.message}`;
        resolve({ code: null, signal: null });
      });
      child.once('exit', (code, signal) => resolve({ code, signal }));
    }).then(async ({ code, signal }) => {
      this.feed?.stop();
      const size = await stat(output).then((s) => s.size, () => 0);
      if (code === 0 && size > 0) return { ok: true, sizeBytes: size };
      const message = `ffmpeg ended with code ${code} signal ${signal}: ${stderr.trim() || 'no output'}`;
      this.log.error({ code, signal, size }, `replay: ${message}`);
      return { ok: false, sizeBytes: size, message };
    });
  }

  static async start(chromium: RunningChromium, encoding: ReplayEncoding & { viewport: { width: number; height: number } }, log: Logger): Promise<Recording> {
    const source: ReplaySource = chromium.display
      ? { kind: 'x11', display: chromium.display.name, width: chromium.display.width, height: chromium.display.height }
      : { kind: 'frames', ...encoding.viewport };
    const child = spawn('ffmpeg', ffmpegArgs(source, encoding), {
      stdio: ['pipe', 'ignore', 'pipe'],
      // x11grab is an X client like Chromium: it needs the display's cookie.
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', ...(chromium.display?.env ?? {}) },
    });
    const recording = new Recording(child, encoding.output, log);
    if (source.kind === 'frames') {
      try {
        recording.feed = await ScreencastFeed.start(chromium.cdp, { sink: child.stdin, framerate: encoding.framerate, log });
      } catch (error) {
        child.kill('SIGKILL');
        await recording.finished;
        throw error;
      }
    }
    log.info({ source: source.kind, framerate: encoding.framerate, max_duration_s: encoding.maxDurationS }, 'replay: recording started');
    return recording;
  }

  /** Asks ffmpeg to finish the file ('q' for the grab, end of input for frames); killed if it takes too long. */
  async stop(): Promise<RecordingResult> {
    if (!this.stopRequested) {
      this.stopRequested = true;
      if (this.feed) this.feed.stop();
      else this.child.stdin!.end('q');
      const timer = setTimeout(() => this.child.kill('SIGKILL'), FINISH_TIMEOUT_MS);
      void this.finished.finally(() => clearTimeout(timer));
    }
    return this.finished;
  }

  get path(): string {
    return this.output;
  }
}
