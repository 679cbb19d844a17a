/**
 * ffmpeg's command line for a recording, as a pure function (unit-tested). Output options
 * follow Kernel's recorder (kernel-images server/lib/recorder/ffmpeg.go): H.264 high
 * profile, yuv420p, so every browser's <video> plays it; unlike Kernel's fragmented MP4,
 * the file is written whole and +faststart moves the index to the front, because it is
 * only read once finished (uploaded, then downloaded).
 */

export type ReplaySource =
  /** A headful browser's Xvfb display, grabbed by ffmpeg itself. */
  | { kind: 'x11'; display: string; width: number; height: number }
  /** JPEG frames written to ffmpeg's stdin at a constant rate (headless: CDP screencast). */
  | { kind: 'frames'; width: number; height: number };

export interface ReplayEncoding {
  framerate: number;
  maxDurationS: number;
  maxBytes: number;
  output: string;
}

/** libx264 with yuv420p needs even dimensions: an odd viewport loses its last pixel column or row. */
export function evenSize(width: number, height: number): { width: number; height: number } {
  return { width: Math.max(2, width - (width % 2)), height: Math.max(2, height - (height % 2)) };
}

export function ffmpegArgs(source: ReplaySource, encoding: ReplayEncoding): string[] {
  const size = evenSize(source.width, source.height);
  const rate = String(encoding.framerate);
  const input =
    source.kind === 'x11'
      ? ['-f', 'x11grab', '-draw_mouse', '1', '-framerate', rate, '-video_size', `${source.width}x${source.height}`, '-i', source.display]
      : // Frames arrive already paced by the agent (one per tick), so their count is the clock.
        ['-f', 'image2pipe', '-c:v', 'mjpeg', '-framerate', rate, '-i', 'pipe:0'];
  return [
    '-hide_banner',
    '-loglevel',
    'error',
    '-nostats',
    ...input,
    // Screencast frames come at the page's size (times its device scale): scaled to the viewport.
    '-vf',
    `scale=${size.width}:${size.height}:flags=bilinear,format=yuv420p`,
    '-r',
    rate,
    '-c:v',
    'libx264',
    '-profile:v',
    'high',
    '-preset',
    'veryfast',
    '-pix_fmt',
    'yuv420p',
    '-movflags',
    '+faststart',
    '-t',
    String(encoding.maxDurationS),
    '-fs',
    String(encoding.maxBytes),
    '-y',
    '-f',
    'mp4',
    encoding.output,
  ];
}
