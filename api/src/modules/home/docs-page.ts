import { createRequire } from 'node:module';
import { readFile } from 'node:fs/promises';

/**
 * /docs: the API reference, Redoc's standalone bundle rendering /openapi.json. Served
 * from the installed `redoc` package, never a CDN, so it works offline and behind a
 * firewall; the page's own start script is a file so the CSP allows no inline script.
 * Redoc draws with styled-components (inline <style>) and runs its search in a worker
 * made from a blob: URL, which the CSP allows and nothing more.
 */

export const DOCS_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<title>Browserplane API reference</title>
<script src="ui-assets/redoc.standalone.js"></script>
<script type="module" src="ui-assets/docs.js"></script>
</head>
<body>
<div id="redoc"></div>
</body>
</html>
`;

export const DOCS_SCRIPT = `// Relative to /docs, so the page also works under a path prefix.
const spec = new URL('openapi.json', location.href).href;
globalThis.Redoc.init(spec, { hideDownloadButton: false, expandResponses: '200,201', sortTagsAlphabetically: false }, document.getElementById('redoc'));
`;

/**
 * The one address the bundle loads from outside: the "powered by" logo in its menu. It
 * becomes an empty data: image, whose load error makes Redoc drop the logo, so the page
 * asks nothing of the Internet (the CSP would block the request anyway).
 */
const REDOC_LOGO = 'https://cdn.redoc.ly/redoc/logo-mini.svg';

let bundle: Promise<string> | undefined;

/** redoc's standalone bundle (bundles/redoc.standalone.js), read once. */
export function redocBundle(): Promise<string> {
  bundle ??= readFile(createRequire(import.meta.url).resolve('redoc/bundles/redoc.standalone.js'), 'utf8').then(
    (text) => text.replaceAll(REDOC_LOGO, 'data:,'),
    (error: unknown) => {
      bundle = undefined;
      throw error;
    },
  );
  return bundle;
}
