import { describe, expect, it } from 'vitest';
import { evenSize, ffmpegArgs } from '../../agent/src/replay/ffmpeg-args.js';
import { replayFailureUrl } from '../../contract/replay-wire.js';

const encoding = { framerate: 12, maxDurationS: 90, maxBytes: 5_000_000, output: '/tmp/r/replay.mp4' };

/** The value that follows `flag` in `args`. */
const after = (args: string[], flag: string) => args[args.indexOf(flag) + 1];

describe('ffmpegArgs', () => {
  it('grabs a headful display with its cookie-bearing name, size and frame rate', () => {
    const args = ffmpegArgs({ kind: 'x11', display: ':7', width: 1280, height: 720 }, encoding);
    expect(after(args, '-f')).toBe('x11grab');
    expect(after(args, '-video_size')).toBe('1280x720');
    expect(after(args, '-i')).toBe(':7');
    expect(after(args, '-framerate')).toBe('12');
  });

  it('reads paced JPEG frames from stdin for a headless browser', () => {
    const args = ffmpegArgs({ kind: 'frames', width: 800, height: 600 }, encoding);
    expect(args.slice(args.indexOf('-f'), args.indexOf('-i') + 2)).toEqual(['-f', 'image2pipe', '-c:v', 'mjpeg', '-framerate', '12', '-i', 'pipe:0']);
  });

  it('encodes H.264 high profile, yuv420p, faststart MP4 at the viewport size, within the duration and size caps', () => {
    const args = ffmpegArgs({ kind: 'frames', width: 800, height: 600 }, encoding);
    expect(after(args, '-c:v')).toBe('mjpeg');
    expect(args.join(' ')).toContain('-c:v libx264 -profile:v high');
    expect(after(args, '-pix_fmt')).toBe('yuv420p');
    expect(after(args, '-movflags')).toBe('+faststart');
    expect(after(args, '-vf')).toBe('scale=800:600:flags=bilinear,format=yuv420p');
    expect(after(args, '-r')).toBe('12');
    expect(after(args, '-t')).toBe('90');
    expect(after(args, '-fs')).toBe('5000000');
    expect(args.at(-1)).toBe('/tmp/r/replay.mp4');
    expect(args.at(-2)).toBe('mp4');
  });

  it('rounds an odd viewport down to even dimensions, which yuv420p needs', () => {
    expect(evenSize(801, 601)).toEqual({ width: 800, height: 600 });
    expect(evenSize(1, 1)).toEqual({ width: 2, height: 2 });
    expect(after(ffmpegArgs({ kind: 'x11', display: ':1', width: 1025, height: 769 }, encoding), '-vf')).toBe('scale=1024:768:flags=bilinear,format=yuv420p');
  });
});

describe('replayFailureUrl', () => {
  it('appends /failure to the path and keeps the token', () => {
    expect(replayFailureUrl('http://127.0.0.1:9/internal/replays/rpl_a/video?token=1.abc')).toBe('http://127.0.0.1:9/internal/replays/rpl_a/video/failure?token=1.abc');
  });
});
