import { createRequire } from 'node:module';
import { readFile, realpath } from 'node:fs/promises';
import path from 'node:path';
import { AppError } from '../../http/errors.js';
import { LIVE_VIEW_CSS, LIVE_VIEW_SCRIPT } from './live-view-page.js';

/**
 * The files the live view page loads: its own script and style, and noVNC's ES modules
 * (core/ and vendor/ of @novnc/novnc) read from the installed package. Read-only, by an
 * allow-list of shapes: a path that is not `novnc/(core|vendor)/….js` of plain segments,
 * or that resolves (links included) outside the package, is a 404, as is anything missing.
 */

export interface LiveViewAsset {
  body: Buffer | string;
  contentType: string;
  cacheControl: string;
}

const OWN_ASSETS: Record<string, Omit<LiveViewAsset, 'cacheControl'>> = {
  'page.js': { body: LIVE_VIEW_SCRIPT, contentType: 'text/javascript; charset=utf-8' },
  'page.css': { body: LIVE_VIEW_CSS, contentType: 'text/css; charset=utf-8' },
};

/** Our own files change with the service; noVNC's only with its pinned version. */
const OWN_CACHE = 'public, max-age=300';
const NOVNC_CACHE = 'public, max-age=86400';
const SEGMENT = /^[A-Za-z0-9_-][A-Za-z0-9._-]*$/;

let packageRoot: Promise<string> | undefined;

/** The real directory of @novnc/novnc (its `exports` name only core/rfb.js, two levels below). */
function novncRoot(): Promise<string> {
  packageRoot ??= realpath(path.dirname(path.dirname(createRequire(import.meta.url).resolve('@novnc/novnc'))));
  return packageRoot;
}

export async function readLiveViewAsset(segments: string[]): Promise<LiveViewAsset> {
  const missing = () => new AppError(404, 'route_not_found', `No live view file ${JSON.stringify(segments.join('/'))}`);
  const own = segments.length === 1 ? OWN_ASSETS[segments[0]!] : undefined;
  if (own) return { ...own, cacheControl: OWN_CACHE };
  const [top, area, ...rest] = segments;
  const safe =
    top === 'novnc' &&
    (area === 'core' || area === 'vendor') &&
    rest.length > 0 &&
    rest.length < 8 &&
    rest.every((segment) => SEGMENT.test(segment) && segment.length <= 100) &&
    rest.at(-1)!.endsWith('.js');
  if (!safe) throw missing();
  const root = await novncRoot();
  const file = await realpath(path.join(root, area, ...rest)).catch(() => undefined);
  if (!file || !file.startsWith(root + path.sep)) throw missing();
  const body = await readFile(file).catch(() => undefined);
  if (!body) throw missing();
  return { body, contentType: 'text/javascript; charset=utf-8', cacheControl: NOVNC_CACHE };
}
