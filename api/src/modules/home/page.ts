/**
 * The home page (GET /): what this service is, its version, where its API reference is,
 * and — only once a person pastes an API key — that key's live sessions and pools with
 * their live view links. The page itself carries no tenant data and no id: GET / needs
 * no key, so everything about a tenant is fetched by the page's own script with the
 * pasted key, which stays in the tab's sessionStorage (never a cookie, never sent
 * anywhere but this service's API). Script and style are files, so the CSP allows no
 * inline code. Everything is addressed relatively, so the page also works under a prefix.
 */

export const UI_ASSET_PREFIX = '/ui-assets';

const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

export const homePageHtml = (version: string) => `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<meta name="referrer" content="no-referrer">
<title>Browserplane</title>
<link rel="stylesheet" href="ui-assets/home.css">
<script type="module" src="ui-assets/home.js"></script>
</head>
<body>
<header><h1>Browserplane</h1><p>Self-hostable control plane for remote browsers, wire-compatible with the Kernel API. Version <span id="version">${escapeHtml(version)}</span>.</p></header>
<nav><ul>
<li><a href="docs">API reference</a> (rendered from <a href="openapi.json">openapi.json</a>)</li>
<li><a href="healthz">Liveness</a>, <a href="readyz">readiness</a>, <a href="metrics">metrics</a></li>
</ul></nav>
<section id="live">
<h2>Live sessions and pools</h2>
<p>Nothing about any project is shown without a key. Paste an API key to list its live sessions and pools; it is kept in this tab only (sessionStorage) and sent only to this service.</p>
<form id="key-form" autocomplete="off">
<label for="key">API key</label> <input id="key" name="key" type="password" spellcheck="false" required>
<button type="submit">Show</button> <button type="button" id="forget">Forget the key</button>
</form>
<p id="status" role="status" aria-live="polite"></p>
<h3>Sessions</h3>
<table id="sessions"><thead><tr><th>Session</th><th>Name</th><th>Started</th><th>Kind</th><th>Live view</th></tr></thead><tbody></tbody></table>
<h3>Pools</h3>
<table id="pools"><thead><tr><th>Pool</th><th>Name</th><th>Size</th><th>Available</th><th>Leased</th></tr></thead><tbody></tbody></table>
</section>
</body>
</html>
`;

export const HOME_CSS = `body { max-width: 64rem; margin: 2rem auto; padding: 0 1rem; font: 15px/1.5 system-ui, sans-serif; color: #1d1d1f; }
h1 { margin-bottom: 0; }
table { border-collapse: collapse; width: 100%; margin-bottom: 1rem; }
th, td { text-align: left; padding: 4px 8px; border-bottom: 1px solid #ddd; }
td.empty { color: #777; }
#status[data-error] { color: #a11; }
`;

export const HOME_SCRIPT = `const KEY = 'browserplane.apiKey';
const form = document.getElementById('key-form');
const input = document.getElementById('key');
const status = document.getElementById('status');

const say = (text, error = false) => {
  status.textContent = text;
  if (error) status.dataset.error = ''; else delete status.dataset.error;
};

function fill(table, rows, empty) {
  const body = document.querySelector('#' + table + ' tbody');
  body.replaceChildren();
  if (rows.length === 0) rows = [[{ text: empty, className: 'empty', span: 5 }]];
  for (const cells of rows) {
    const tr = document.createElement('tr');
    for (const cell of cells) {
      const td = document.createElement('td');
      if (cell.span) td.colSpan = cell.span;
      if (cell.className) td.className = cell.className;
      if (cell.href) {
        const a = document.createElement('a');
        a.href = cell.href;
        a.target = '_blank';
        a.rel = 'noopener noreferrer';
        a.textContent = cell.text;
        td.append(a);
      } else td.textContent = cell.text ?? '';
      tr.append(td);
    }
    body.append(tr);
  }
}

const safeLink = (url) => (typeof url === 'string' && /^https?:\\/\\//.test(url) ? url : undefined);

async function api(path, key) {
  const res = await fetch(path, { headers: { Authorization: 'Bearer ' + key }, credentials: 'omit', cache: 'no-store' });
  if (!res.ok) {
    const body = await res.json().catch(() => ({}));
    throw new Error(res.status + ' ' + (body.message ?? res.statusText));
  }
  return res.json();
}

async function show(key) {
  say('Loading…');
  try {
    const [sessions, pools] = await Promise.all([api('browsers?limit=100', key), api('browser_pools', key)]);
    fill('sessions', sessions.map((s) => {
      const live = safeLink(s.browser_live_view_url);
      return [{ text: s.session_id }, { text: s.name ?? '' }, { text: s.created_at }, { text: s.headless ? 'headless' : 'headful' },
        live ? { text: 'open', href: live } : { text: '—' }];
    }), 'No live session');
    fill('pools', pools.map((p) => [{ text: p.id }, { text: p.name ?? p.browser_pool_config?.name ?? '' },
      { text: String(p.browser_pool_config?.size ?? '') }, { text: String(p.available_count) }, { text: String(p.acquired_count) }]), 'No pool');
    say('Live sessions and pools of this key’s project.');
  } catch (error) {
    fill('sessions', [], '');
    fill('pools', [], '');
    say('Could not list: ' + error.message, true);
  }
}

form.addEventListener('submit', (event) => {
  event.preventDefault();
  const key = input.value.trim();
  if (!key) return;
  sessionStorage.setItem(KEY, key);
  input.value = '';
  void show(key);
});
document.getElementById('forget').addEventListener('click', () => {
  sessionStorage.removeItem(KEY);
  fill('sessions', [], '');
  fill('pools', [], '');
  say('The key is forgotten.');
});
const saved = sessionStorage.getItem(KEY);
if (saved) void show(saved);
`;
