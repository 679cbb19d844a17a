import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { BadRequestError, ConflictError, NotFoundError } from '@onkernel/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rejection } from './support/sdk.js';
import { cleanupServices, startService, type RunningService } from '../support/service.js';

/**
 * browsers.replays through the official SDK against the built service: real Chromium,
 * the real ffmpeg in the agent, the real ffprobe on what download() returns. Nothing is faked.
 */

const run = promisify(execFile);
let service: RunningService;

beforeAll(async () => {
  service = await startService();
});
afterAll(async () => {
  await cleanupServices();
});

async function probe(bytes: Buffer): Promise<{ codec: string; width: number; height: number; duration: number }> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'replay-sdk-'));
  try {
    const file = path.join(dir, 'r.mp4');
    await writeFile(file, bytes);
    const { stdout } = await run('ffprobe', ['-v', 'error', '-select_streams', 'v:0', '-show_entries', 'stream=codec_name,width,height:format=duration', '-of', 'json', file]);
    const parsed = JSON.parse(stdout) as { streams: Array<{ codec_name: string; width: number; height: number }>; format: { duration: string } };
    return { codec: parsed.streams[0]!.codec_name, width: parsed.streams[0]!.width, height: parsed.streams[0]!.height, duration: Number(parsed.format.duration) };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

describe('browsers.replays through the SDK', () => {
  it('starts, lists, stops and downloads an MP4 of the session', { timeout: 90_000 }, async () => {
    const client = service.client();
    const session = await client.browsers.create({ headless: true, timeout_seconds: 120, viewport: { width: 1024, height: 768 } });
    try {
      const started = await client.browsers.replays.start(session.session_id, { framerate: 10, max_duration_in_seconds: 30 });
      expect(started.replay_id).toMatch(/^rpl_/);
      expect(started.finished_at).toBeNull();
      expect(started.replay_view_url).toBeUndefined();
      const listed = await client.browsers.replays.list(session.session_id);
      expect(listed.map((r) => r.replay_id)).toEqual([started.replay_id]);
      const busy = await rejection(client.browsers.replays.download(started.replay_id, { id: session.session_id }), ConflictError);
      expect(busy.error).toMatchObject({ code: 'replay_in_progress' });
      await sleep(1500);
      await client.browsers.replays.stop(started.replay_id, { id: session.session_id });
      const [after] = await client.browsers.replays.list(session.session_id);
      expect(after!.finished_at).toBeTruthy();
      // replay_view_url: a page anyone holding it opens without a key, the video behind it seekable.
      const view = new URL(after!.replay_view_url!);
      const html = await (await fetch(view)).text();
      expect(html).toContain('<video');
      const part = await fetch(new URL(`video?token=${view.searchParams.get('token')!}`, view), { headers: { range: 'bytes=0-7' } });
      expect(part.status).toBe(206);
      expect(Buffer.from(await part.arrayBuffer()).subarray(4, 8).toString('latin1')).toBe('ftyp');

      const response = await client.browsers.replays.download(started.replay_id, { id: session.session_id });
      expect(response.headers.get('content-type')).toBe('video/mp4');
      const bytes = Buffer.from(await response.arrayBuffer());
      expect(bytes.subarray(4, 8).toString('latin1')).toBe('ftyp');
      const facts = await probe(bytes);
      expect(facts).toMatchObject({ codec: 'h264', width: 1024, height: 768 });
      expect(facts.duration).toBeGreaterThanOrEqual(1);
      expect(facts.duration).toBeLessThanOrEqual(30);

      const again = await rejection(client.browsers.replays.stop(started.replay_id, { id: session.session_id }), BadRequestError);
      expect(again.error).toMatchObject({ code: 'replay_not_recording' });
    } finally {
      await client.browsers.deleteByID(session.session_id).catch(() => undefined);
    }
  });

  it('refuses bad input and unknown replays with the SDK’s error classes', { timeout: 60_000 }, async () => {
    const client = service.client();
    const session = await client.browsers.create({ headless: true, timeout_seconds: 60 });
    try {
      await rejection(client.browsers.replays.start(session.session_id, { framerate: 0 }), BadRequestError);
      await rejection(client.browsers.replays.start(session.session_id, { max_duration_in_seconds: -5 }), BadRequestError);
      await rejection(client.browsers.replays.stop('rpl_nope', { id: session.session_id }), NotFoundError);
      await rejection(client.browsers.replays.download('rpl_nope', { id: session.session_id }), NotFoundError);
      expect(await client.browsers.replays.list(session.session_id)).toEqual([]);
    } finally {
      await client.browsers.deleteByID(session.session_id).catch(() => undefined);
    }
  });
});

describe('replays across a service stop', () => {
  it('finishes a running recording before the service stops listening; the next start serves it', { timeout: 180_000 }, async () => {
    const first = await startService();
    const client = first.client();
    const session = await client.browsers.create({ headless: true, timeout_seconds: 300, viewport: { width: 640, height: 480 } });
    const { replay_id } = await client.browsers.replays.start(session.session_id, { framerate: 5 });
    await sleep(1000);
    expect(await first.stop('SIGTERM')).toEqual({ code: 0, signal: null });

    const next = await startService({ dataDir: first.dataDir });
    const again = next.client(first.adminKey);
    const [item] = await again.browsers.replays.list(session.session_id);
    expect(item).toMatchObject({ replay_id });
    expect(item!.finished_at).toBeTruthy();
    const response = await again.browsers.replays.download(replay_id, { id: session.session_id });
    expect(await probe(Buffer.from(await response.arrayBuffer()))).toMatchObject({ codec: 'h264', width: 640, height: 480 });
  });
});

