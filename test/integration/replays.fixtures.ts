import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { expect, vi } from 'vitest';
import type { HttpClient } from '../support/http.js';

/** Helpers for the replay tests: calls on one session, and the video looked at with the real ffprobe and ffmpeg. */

const run = promisify(execFile);

export class ReplayCalls {
  constructor(
    readonly client: HttpClient,
    readonly sessionId: string,
  ) {}

  start(body?: Record<string, unknown>) {
    return this.client.post(`/browsers/${this.sessionId}/replays`, body);
  }

  async startOk(body: Record<string, unknown> = {}): Promise<string> {
    const res = await this.start(body);
    expect(res.status, res.text).toBe(200);
    return res.body.replay_id as string;
  }

  stop(replayId: string) {
    return this.client.post(`/browsers/${this.sessionId}/replays/${replayId}/stop`);
  }

  list() {
    return this.client.get(`/browsers/${this.sessionId}/replays`);
  }

  /** The download as bytes (the test client reads text). */
  async download(replayId: string): Promise<{ status: number; type: string | null; bytes: Buffer; json: unknown }> {
    const headers: Record<string, string> = { ...this.client.extraHeaders, accept: 'video/mp4' };
    if (this.client.key) headers.authorization = `Bearer ${this.client.key}`;
    const res = await fetch(`${this.client.baseUrl}/browsers/${this.sessionId}/replays/${replayId}`, { headers });
    const bytes = Buffer.from(await res.arrayBuffer());
    const type = res.headers.get('content-type');
    return { status: res.status, type, bytes, json: type?.includes('json') ? (JSON.parse(bytes.toString('utf8')) as unknown) : undefined };
  }

  /** Waits until the list shows the replay ended (max duration, session end). */
  ended(replayId: string, timeoutMs = 60_000): Promise<void> {
    return vi.waitFor(
      async () => {
        const res = await this.list();
        const item = (res.body as Array<{ replay_id: string; finished_at: string | null }>).find((r) => r.replay_id === replayId);
        expect(item?.finished_at).toBeTruthy();
      },
      { timeout: timeoutMs, interval: 200 },
    );
  }
}

export interface VideoFacts {
  codec: string;
  width: number;
  height: number;
  durationS: number;
  profile: string;
  pixFmt: string;
}

/** The video's facts and its colours, read from a scratch copy with the real tools. */
export class Video {
  private constructor(
    private readonly dir: string,
    readonly file: string,
  ) {}

  static async of(bytes: Buffer): Promise<Video> {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'replay-test-'));
    const file = path.join(dir, 'replay.mp4');
    await writeFile(file, bytes);
    return new Video(dir, file);
  }

  async facts(): Promise<VideoFacts> {
    const { stdout } = await run('ffprobe', [
      '-v',
      'error',
      '-select_streams',
      'v:0',
      '-show_entries',
      'stream=codec_name,width,height,profile,pix_fmt:format=duration',
      '-of',
      'json',
      this.file,
    ]);
    const parsed = JSON.parse(stdout) as { streams: Array<{ codec_name: string; width: number; height: number; profile: string; pix_fmt: string }>; format: { duration: string } };
    const stream = parsed.streams[0]!;
    return { codec: stream.codec_name, width: stream.width, height: stream.height, durationS: Number(parsed.format.duration), profile: stream.profile, pixFmt: stream.pix_fmt };
  }

  /** The average colour of an 8x8 square around (x, y) of the frame at `atS` seconds. */
  async colourAt(atS: number, x: number, y: number): Promise<[number, number, number]> {
    const { stdout } = await run(
      'ffmpeg',
      ['-v', 'error', '-ss', String(atS), '-i', this.file, '-frames:v', '1', '-vf', `crop=8:8:${x - 4}:${y - 4},scale=1:1`, '-f', 'rawvideo', '-pix_fmt', 'rgb24', '-'],
      { encoding: 'buffer' },
    );
    const pixel = stdout as unknown as Buffer;
    expect(pixel.length).toBe(3);
    return [pixel[0]!, pixel[1]!, pixel[2]!];
  }

  async remove(): Promise<void> {
    await rm(this.dir, { recursive: true, force: true });
  }
}

/** Red, green or blue, whichever channel dominates clearly; 'other' else (H.264 shifts colours a little). */
export function dominant([r, g, b]: [number, number, number]): 'red' | 'green' | 'blue' | 'other' {
  if (r > 180 && g < 80 && b < 80) return 'red';
  if (g > 180 && r < 80 && b < 80) return 'green';
  if (b > 180 && r < 80 && g < 80) return 'blue';
  return 'other';
}

/** A page that is one solid colour, as a data: URL. */
export const solidPage = (colour: string) => `data:text/html,<html><body style="margin:0;background:${colour};height:100vh"></body></html>`;
