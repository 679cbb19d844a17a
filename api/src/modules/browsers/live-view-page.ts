/**
 * The live view page and its own script and style, inlined here so the build copies
 * nothing but compiled TypeScript. The page is opened as /browsers/{id}/live?token=…
 * and everything it loads is relative to that address, so it also works behind a
 * reverse proxy that mounts the service under a prefix.
 *
 * The script connects noVNC to /browsers/{id}/vnc with the same token (the service's
 * WebSocket proxy checks it again), scales the remote screen to the window, forwards
 * mouse and keyboard, and says plainly why the view stopped when it does: it asks the
 * page address again, which answers 404 once the session is gone and 401/403 once the
 * token is no longer valid. `body[data-state]` (connecting, connected, disconnected)
 * and `body[data-scale]` (fit, 1:1) are there for embedding pages and tests.
 *
 * A toolbar collapsed to a "⋯" in the top right corner opens Reconnect (a new socket,
 * the old one closed) and the Fit / 1:1 toggle; a read-only view (readOnly=true, see
 * live-view-access.ts) shows a badge beside it.
 */

export const LIVE_VIEW_ASSET_PREFIX = '/live-view';

export const LIVE_VIEW_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>Browser live view</title>
<link rel="stylesheet" href="../../live-view/page.css">
<script type="module" src="../../live-view/page.js"></script>
</head>
<body data-state="loading" data-scale="fit">
<div id="status" role="status" aria-live="polite">Loading the live view…</div>
<div id="screen"></div>
<div id="toolbar" data-open="false">
<span id="read-only-badge" hidden title="Your keys and clicks are not sent to the browser">Read-only</span>
<div id="tools" role="toolbar" aria-label="Live view" hidden>
<button type="button" id="reconnect" title="Open the connection again">Reconnect</button>
<button type="button" id="scale" aria-pressed="true" title="Fit the screen to the window, or show it pixel for pixel">Fit</button>
</div>
<button type="button" id="toolbar-toggle" aria-expanded="false" aria-controls="tools" aria-label="Live view controls" title="Live view controls">⋯</button>
</div>
</body>
</html>
`;

/** The toolbar floats in the top right corner, over the screen: opening it moves nothing. */
export const LIVE_VIEW_CSS = `html, body { height: 100%; margin: 0; background: #111; color: #eee; font: 15px/1.4 system-ui, sans-serif; overflow: hidden; }
#screen { position: fixed; inset: 0; }
#status { position: fixed; top: 0; left: 0; right: 0; z-index: 1; padding: 10px 16px; background: #2b2b2b; border-bottom: 1px solid #444; text-align: center; }
body[data-state="connected"] #status { display: none; }
body[data-state="disconnected"] #status { background: #5a1d1d; border-color: #8a2b2b; }
#toolbar { position: fixed; top: 6px; right: 6px; z-index: 2; display: flex; gap: 4px; align-items: center; opacity: .55; transition: opacity .15s; }
#toolbar:hover, #toolbar:focus-within, #toolbar[data-open="true"] { opacity: 1; }
#toolbar button { font: 13px/1 system-ui, sans-serif; color: #eee; background: rgba(30, 30, 30, .85); border: 1px solid #555; border-radius: 5px; padding: 5px 8px; cursor: pointer; }
#toolbar button:hover { background: rgba(60, 60, 60, .95); }
#tools { display: flex; gap: 4px; }
#tools[hidden] { display: none; }
#read-only-badge { font: 12px/1 system-ui, sans-serif; padding: 5px 7px; border-radius: 5px; background: rgba(150, 100, 0, .85); color: #fff; }
#read-only-badge[hidden] { display: none; }
`;

export const LIVE_VIEW_SCRIPT = `import RFB from './novnc/core/rfb.js';

const status = document.getElementById('status');
const screen = document.getElementById('screen');
const show = (state, text) => {
  document.body.dataset.state = state;
  status.textContent = text;
};

// /browsers/{id}/live?token=… -> ws(s)://same host/browsers/{id}/vnc?token=…
const url = new URL('vnc' + location.search, location.href);
url.protocol = location.protocol === 'https:' ? 'wss:' : 'ws:';
// The service drops a read-only view's input anyway; the page only stops sending it.
const readOnly = new URLSearchParams(location.search).get('readOnly') === 'true';

async function pageStatus() {
  try {
    return (await fetch(location.href, { cache: 'no-store', credentials: 'omit' })).status;
  } catch {
    return 0;
  }
}

// A session being deleted closes its browser before it is marked deleted: ask a few times.
async function explainDisconnect() {
  let answer = await pageStatus();
  for (let attempt = 0; answer === 200 && attempt < 5; attempt += 1) {
    await new Promise((resolve) => setTimeout(resolve, 1000));
    answer = await pageStatus();
  }
  if (answer === 404) return 'The browser session has ended.';
  if (answer === 401 || answer === 403) return 'This live view link is no longer valid. Read the session again for a fresh link.';
  if (answer === 409) return 'This browser has no screen to show (it is headless).';
  return 'The connection to the browser was lost. Use Reconnect (⋯, top right) or reload the page.';
}

let rfb;
let fit = true;

function connect() {
  show('connecting', 'Connecting to the browser…');
  const current = new RFB(screen, url.href, { shared: true });
  rfb = current;
  current.scaleViewport = fit;
  current.resizeSession = false;
  current.viewOnly = readOnly;
  current.focusOnClick = !readOnly;
  current.background = '#111';
  current.addEventListener('connect', () => {
    show('connected', 'Connected');
    if (!readOnly) current.focus();
  });
  current.addEventListener('securityfailure', (event) => show('disconnected', 'The live view was refused: ' + (event.detail.reason || 'security failure')));
  current.addEventListener('disconnect', async () => {
    // A connection replaced by Reconnect says nothing.
    if (rfb !== current) return;
    show('disconnected', 'The live view has stopped…');
    const reason = await explainDisconnect();
    if (rfb === current) show('disconnected', reason);
  });
}

const toolbar = document.getElementById('toolbar');
const tools = document.getElementById('tools');
const toggle = document.getElementById('toolbar-toggle');
const scale = document.getElementById('scale');
document.getElementById('read-only-badge').hidden = !readOnly;
toggle.addEventListener('click', () => {
  const open = tools.hidden;
  tools.hidden = !open;
  toolbar.dataset.open = String(open);
  toggle.setAttribute('aria-expanded', String(open));
});
document.getElementById('reconnect').addEventListener('click', () => {
  const previous = rfb;
  rfb = undefined;
  previous?.disconnect();
  connect();
});
scale.addEventListener('click', () => {
  fit = !fit;
  if (rfb) rfb.scaleViewport = fit;
  document.body.dataset.scale = fit ? 'fit' : '1:1';
  scale.textContent = fit ? 'Fit' : '1:1';
  scale.setAttribute('aria-pressed', String(fit));
});

connect();
`;

/**
 * Only what the page needs: its own files, noVNC's modules, the WebSocket, and data: URLs
 * for noVNC's cursor. Framing: this service's own pages (the hosted login page embeds the
 * live view) and the origins of BROWSERPLANE_LIVE_VIEW_FRAME_ANCESTORS, no one else.
 */
export function liveViewPageHeaders(frameAncestors: readonly string[] = []): Record<string, string> {
  return {
    'Content-Type': 'text/html; charset=utf-8',
    'Content-Security-Policy':
      "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
      `frame-ancestors ${["'self'", ...frameAncestors].join(' ')}; base-uri 'none'; form-action 'none'`,
    // The token is in the address: never send it on as a referrer, never keep the page.
    'Referrer-Policy': 'no-referrer',
    'Cache-Control': 'no-store',
    'X-Content-Type-Options': 'nosniff',
    // For browsers without CSP frame-ancestors; those with it ignore this header, so it
    // does not stand in the way of the configured origins.
    'X-Frame-Options': 'SAMEORIGIN',
  };
}
