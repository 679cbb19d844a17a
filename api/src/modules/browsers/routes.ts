import type { Request } from 'express';
import type { AppDeps } from '../../app-deps.js';
import type { AppServices } from '../../app-services.js';
import { paginationResponseHeaders } from '../../http/pagination.js';
import { defineRoute, json, noContent, type RouteDef } from '../../http/route.js';
import { errorSchema } from '../../http/schemas.js';
import { errorResponses } from '../../http/standard-responses.js';
import { projectScopeOf } from '../../scope.js';
import type { BrowserRuntime } from '../../../../contract/browser-runtime.js';
import { createCdpTokens } from './cdp-token.js';
import { computerRoutes } from './computer-routes.js';
import { curlRoutes } from './curl-routes.js';
import { fsRoutes } from './fs-routes.js';
import { liveViewRoutes } from './live-view.js';
import { playwrightRoutes } from './playwright-routes.js';
import { presentSession, publicWsBase, regionOf } from './present.js';
import { processRoutes } from './process-routes.js';
import { profileArchiveRoutes } from './profile-archive-routes.js';
import { extensionArchiveRoutes } from './extension-archive.js';
import { extensionRoutes } from './extension-routes.js';
import {
  browserIdParams,
  browserSessionSchema,
  createBrowserHttpBody,
  getBrowserQuery,
  listBrowsersQuery,
  updateBrowserBody,
} from './schema.js';
import { createSession, DELETE_REASONS, endSession, getSession } from './service.js';
import { listSessions, type SessionRow } from './store.js';
import { updateSessionSettings } from './update.js';

const tags = ['Browsers'];

export interface BrowserRouteOptions {
  /** The runtime that launches browsers; default: `deps.runtime`, read at each request. */
  runtime?: BrowserRuntime;
}

export function browserRoutes(appDeps: AppDeps, services: AppServices, options: BrowserRouteOptions = {}): RouteDef[] {
  const deps: AppDeps = options.runtime ? { ...appDeps, runtime: options.runtime } : appDeps;
  const { db } = deps;
  const tokens = createCdpTokens(deps);
  const present = (req: Request) => {
    const ctx = { tokens, wsBase: publicWsBase(deps, req), now: deps.clock.now(), region: regionOf(deps.settings) };
    return (row: SessionRow) => presentSession(ctx, row);
  };
  return [
    defineRoute({
      method: 'post',
      path: '/browsers',
      operationId: 'createBrowser',
      summary: 'Start a browser session and answer once it is ready',
      description:
        'Counts toward max_concurrent_sessions of the project (or the org default for projects) and of the org: 429 concurrency_limit_exceeded. ' +
        'A browser not ready within 30 s is a 504 browser_launch_timeout; a failed start is a 502 browser_launch_failed (the session is then deleted).',
      tags,
      auth: 'project',
      body: createBrowserHttpBody,
      responses: {
        200: { description: 'The running session', schema: browserSessionSchema },
        ...errorResponses(400, 404, 409, 429),
        502: { description: 'browser_launch_failed: the browser could not be started; the session is deleted', schema: errorSchema },
        504: { description: 'browser_launch_timeout: the browser was not ready in time; the session is deleted', schema: errorSchema },
      },
      // A browser an app's run creates with its own key belongs to that invocation (deleted when it ends).
      handler: async ({ body, auth, req }) => {
        const input = body.invocation_id === undefined && auth.apiKey.invocationId ? { ...body, invocation_id: auth.apiKey.invocationId } : body;
        return json(await present(req)(await createSession(deps, projectScopeOf(auth), input, services.spares)));
      },
    }),
    defineRoute({
      method: 'get',
      path: '/browsers',
      operationId: 'listBrowsers',
      summary: 'List browser sessions, newest first',
      tags,
      auth: 'project',
      query: listBrowsersQuery,
      responses: {
        200: { description: 'A page of sessions', schema: browserSessionSchema.array(), headers: paginationResponseHeaders },
        ...errorResponses(400),
      },
      handler: async ({ query, auth, req }) => {
        const rows = await listSessions(db, projectScopeOf(auth), {
          status: query.status ?? (query.include_deleted === true ? 'all' : 'active'),
          query: query.query,
          tags: query.tags,
          limit: query.limit,
          offset: query.offset,
        });
        const hasMore = rows.length > query.limit;
        const items = await Promise.all(rows.slice(0, query.limit).map(present(req)));
        return json(items, 200, {
          'X-Has-More': String(hasMore),
          'X-Next-Offset': String(hasMore ? query.offset + items.length : 0),
        });
      },
    }),
    defineRoute({
      method: 'get',
      path: '/browsers/{id_or_name}',
      operationId: 'getBrowser',
      summary: 'Get a browser session; each read renews the token in cdp_ws_url',
      tags,
      auth: 'project',
      params: browserIdParams,
      query: getBrowserQuery,
      responses: { 200: { description: 'The session', schema: browserSessionSchema }, ...errorResponses(400, 404) },
      handler: async ({ params, query, auth, req }) =>
        json(await present(req)(await getSession(db, projectScopeOf(auth), params.id_or_name, query.include_deleted === true))),
    }),
    defineRoute({
      method: 'patch',
      path: '/browsers/{id_or_name}',
      operationId: 'updateBrowser',
      summary: 'Change a session’s name, tags, telemetry, proxy, viewport or profile',
      description:
        'proxy_id and viewport are applied to the running browser before anything is stored; a change the browser cannot take is a 409 and stores nothing.',
      tags,
      auth: 'project',
      params: browserIdParams,
      body: updateBrowserBody,
      responses: { 200: { description: 'The session', schema: browserSessionSchema }, ...errorResponses(400, 404, 409) },
      handler: async ({ params, body, auth, req }) =>
        json(await present(req)(await updateSessionSettings(deps, projectScopeOf(auth), params.id_or_name, body))),
    }),
    defineRoute({
      method: 'delete',
      path: '/browsers/{id_or_name}',
      operationId: 'deleteBrowser',
      summary: 'Close the browser (CDP Browser.close) and mark the session deleted',
      tags,
      auth: 'project',
      params: browserIdParams,
      responses: { 204: { description: 'Deleted' }, ...errorResponses(400, 404) },
      handler: async ({ params, auth }) => {
        await endSession(deps, await getSession(db, projectScopeOf(auth), params.id_or_name), DELETE_REASONS.api);
        return noContent();
      },
    }),
    ...computerRoutes(deps),
    ...curlRoutes(deps),
    ...fsRoutes(deps),
    ...processRoutes(deps),
    ...liveViewRoutes(deps),
    ...playwrightRoutes(deps),
    ...profileArchiveRoutes(deps, services),
    ...extensionArchiveRoutes(deps),
    ...extensionRoutes(deps),
  ];
}
