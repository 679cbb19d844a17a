import type { Request, Response } from 'express';
import { pipeline } from 'node:stream/promises';
import type { Logger } from 'pino';
import type { AppDeps } from '../../app-deps.js';
import { notFound } from '../../http/errors.js';
import type { ByteRange } from '../../ports/replay-store.js';
import type { ReplayRow } from './store.js';

/**
 * Sends a stored video, whole or the one byte range the request asks for (RFC 9110 §14):
 * a <video> element seeks by asking for ranges, and players resume downloads the same way.
 * Several ranges in one request are answered with the whole video, which the RFC allows.
 */

export type RangeAsk = ByteRange | 'whole' | 'unsatisfiable';

/** The one range of a `Range: bytes=…` header within `size` bytes. */
export function parseRange(header: string | undefined, size: number): RangeAsk {
  if (!header) return 'whole';
  const match = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  if (!match) return 'whole';
  const [, first, last] = match as unknown as [string, string, string];
  if (first === '' && last === '') return 'whole';
  if (first === '') {
    // The last N bytes.
    const suffix = Number(last);
    if (suffix === 0 || size === 0) return 'unsatisfiable';
    return { start: Math.max(0, size - suffix), end: size - 1 };
  }
  const start = Number(first);
  const end = last === '' ? size - 1 : Math.min(Number(last), size - 1);
  if (start >= size || end < start) return 'unsatisfiable';
  return { start, end };
}

export interface VideoSend {
  req: Request;
  res: Response;
  log: Logger;
  /** `attachment` for the download, `inline` for the view page's player. */
  disposition: 'attachment' | 'inline';
  /** Headers the caller adds (the view's cross-origin policy). */
  headers?: Record<string, string>;
}

export async function sendReplayVideo(deps: Pick<AppDeps, 'replayStore'>, row: ReplayRow, send: VideoSend): Promise<void> {
  const ref = { orgId: row.org_id, projectId: row.project_id, replayId: row.id };
  const size = Number(row.size_bytes ?? 0);
  const ask = parseRange(send.req.headers.range, size);
  const { res } = send;
  res.setHeader('Accept-Ranges', 'bytes');
  res.setHeader('Cache-Control', 'no-store');
  if (ask === 'unsatisfiable') {
    res.status(416).setHeader('Content-Range', `bytes */${size}`);
    res.end();
    return;
  }
  const video = await deps.replayStore.open(ref, ask === 'whole' ? undefined : ask);
  if (!video) throw notFound('Replay', row.id);
  res.status(ask === 'whole' ? 200 : 206);
  res.setHeader('Content-Type', 'video/mp4');
  res.setHeader('Content-Disposition', `${send.disposition}; filename="${row.id}.mp4"`);
  for (const [name, value] of Object.entries(send.headers ?? {})) res.setHeader(name, value);
  if (ask === 'whole') {
    res.setHeader('Content-Length', String(video.sizeBytes));
  } else {
    res.setHeader('Content-Length', String(ask.end - ask.start + 1));
    res.setHeader('Content-Range', `bytes ${ask.start}-${ask.end}/${video.sizeBytes}`);
  }
  try {
    await pipeline(video.stream, res);
  } catch (error) {
    // Headers are out: cutting the connection is how the client learns the video is not whole.
    send.log.warn({ err: error, replayId: row.id }, 'replay video ended early');
    res.destroy();
  }
}
