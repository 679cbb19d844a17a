import { createHash } from 'node:crypto';

/**
 * The replay view page: a <video> element and nothing else. No script at all; its one
 * style block is allowed by its hash, so the CSP can forbid everything the page does not
 * need, as the live view page's does.
 */

const STYLE =
  'html,body{margin:0;height:100%;background:#111}' +
  'body{display:flex;align-items:center;justify-content:center}' +
  'video{max-width:100%;max-height:100%}';

const styleHash = createHash('sha256').update(STYLE).digest('base64');

export const REPLAY_VIEW_PAGE_HEADERS: Record<string, string> = {
  'Content-Type': 'text/html; charset=utf-8',
  'Content-Security-Policy':
    `default-src 'none'; media-src 'self'; style-src 'sha256-${styleHash}'; ` + "frame-ancestors 'self'; base-uri 'none'; form-action 'none'",
  // The token is in the address: never send it on as a referrer, never keep the page.
  'Referrer-Policy': 'no-referrer',
  'Cache-Control': 'no-store',
  'X-Content-Type-Options': 'nosniff',
  'X-Frame-Options': 'SAMEORIGIN',
};

/** Headers of the video the page plays: only this origin's pages may embed it. */
export const REPLAY_VIEW_VIDEO_HEADERS: Record<string, string> = {
  'Cross-Origin-Resource-Policy': 'same-origin',
  'Referrer-Policy': 'no-referrer',
  'X-Content-Type-Options': 'nosniff',
};

const escapeHtml = (text: string) =>
  text.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

/** The page for one replay; the video's address is relative, so a path prefix of a reverse proxy is kept. */
export function replayViewHtml(replayId: string, token: string): string {
  const src = `video?token=${encodeURIComponent(token)}`;
  return (
    '<!doctype html><html lang="en"><head><meta charset="utf-8">' +
    '<meta name="viewport" content="width=device-width,initial-scale=1">' +
    `<title>Replay ${escapeHtml(replayId)}</title><style>${STYLE}</style></head>` +
    `<body><video controls playsinline preload="metadata" src="${escapeHtml(src)}"></video></body></html>`
  );
}
