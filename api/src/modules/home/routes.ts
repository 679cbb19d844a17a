import { z } from 'zod';
import { AppError } from '../../http/errors.js';
import { defineRoute, type RouteDef } from '../../http/route.js';
import { errorResponses } from '../../http/standard-responses.js';
import { API_VERSION } from '../../version.js';
import { DOCS_HTML, DOCS_SCRIPT, redocBundle } from './docs-page.js';
import { HOME_CSS, HOME_SCRIPT, homePageHtml, UI_ASSET_PREFIX } from './page.js';

const tags = ['Operations'];

const COMMON_HEADERS: Record<string, string> = {
  'Content-Type': 'text/html; charset=utf-8',
  'Referrer-Policy': 'no-referrer',
  'Cache-Control': 'no-cache',
  'X-Content-Type-Options': 'nosniff',
  'X-Frame-Options': 'DENY',
};

/** The home page fetches the API with a pasted key (connect-src 'self'); nothing inline. */
export const HOME_PAGE_HEADERS: Record<string, string> = {
  ...COMMON_HEADERS,
  'Content-Security-Policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
    "frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
};

/** Redoc injects its styles and makes its search worker from a blob: URL; nothing leaves this origin. */
export const DOCS_PAGE_HEADERS: Record<string, string> = {
  ...COMMON_HEADERS,
  'Content-Security-Policy':
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self' data:; " +
    "connect-src 'self'; worker-src blob:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
};

const ASSETS: Record<string, { contentType: string; body: () => Promise<Buffer | string> | string }> = {
  'home.js': { contentType: 'text/javascript; charset=utf-8', body: () => HOME_SCRIPT },
  'home.css': { contentType: 'text/css; charset=utf-8', body: () => HOME_CSS },
  'docs.js': { contentType: 'text/javascript; charset=utf-8', body: () => DOCS_SCRIPT },
  'redoc.standalone.js': { contentType: 'text/javascript; charset=utf-8', body: redocBundle },
};

const page = (path: string, operationId: string, summary: string, description: string, html: () => string, headers: Record<string, string>) =>
  defineRoute({
    method: 'get',
    path,
    operationId,
    summary,
    description,
    tags,
    auth: 'public',
    responses: { 200: { description: 'The page', schema: z.string(), contentType: 'text/html' } },
    handler: ({ res }) => {
      res.status(200).set(headers).send(html());
      return { kind: 'handled' };
    },
  });

/** GET / and /docs, pages for people, and the files they load. No key, no tenant data. */
export function homeRoutes(): RouteDef[] {
  const home = homePageHtml(API_VERSION);
  return [
    page('/', 'getHomePage', 'The home page: version and links', 'A small HTML page with the version and links to the API reference. It shows a project’s live sessions and pools only after a person pastes an API key into it; the page itself holds no tenant data.', () => home, HOME_PAGE_HEADERS),
    page('/docs', 'getApiReference', 'The API reference, rendered from /openapi.json', 'Redoc, served by this service (no CDN), rendering this OpenAPI document.', () => DOCS_HTML, DOCS_PAGE_HEADERS),
    defineRoute({
      method: 'get',
      path: `${UI_ASSET_PREFIX}/{file}`,
      operationId: 'getUiAsset',
      summary: 'Scripts and style of the home page and the API reference',
      description: 'home.js, home.css, docs.js and redoc.standalone.js (Redoc’s bundle from the installed package).',
      tags,
      auth: 'public',
      params: z.object({ file: z.string().min(1).max(64).describe('The file: home.js, home.css, docs.js or redoc.standalone.js') }),
      responses: { 200: { description: 'The file', schema: z.string(), contentType: ['text/javascript', 'text/css'] }, ...errorResponses(404) },
      handler: async ({ params: p, res }) => {
        const asset = Object.hasOwn(ASSETS, p.file) ? ASSETS[p.file] : undefined;
        if (!asset) throw new AppError(404, 'not_found', `No file ${JSON.stringify(p.file)}`);
        const body = await asset.body();
        res.status(200).set({ 'Content-Type': asset.contentType, 'Cache-Control': 'public, max-age=300', 'X-Content-Type-Options': 'nosniff' }).send(body);
        return { kind: 'handled' };
      },
    }),
  ];
}
