import type { AppDeps } from '../../app-deps.js';
import type { AppServices } from '../../app-services.js';
import { page, paginationResponseHeaders } from '../../http/pagination.js';
import { defineRoute, json, noContent, type RouteDef } from '../../http/route.js';
import { errorResponses } from '../../http/standard-responses.js';
import { actorOf, projectScopeOf } from '../../scope.js';
import { browserSessionSchema } from '../browsers/schema.js';
import { presentSession, publicWsBase, regionOf } from '../browsers/present.js';
import { createCdpTokens } from '../browsers/cdp-token.js';
import {
  acquirePoolBody,
  browserPoolSchema,
  createPoolHttpBody,
  deletePoolBody,
  listPoolsQuery,
  MAX_ACQUIRE_WAIT_SECONDS,
  poolIdParams,
  releasePoolBody,
  updatePoolBody,
} from './schema.js';
import { getPool } from './lookup.js';
import { createPool, deletePool, updatePoolSettings, type PoolServiceDeps } from './service.js';
import { listPools, type PoolRow } from './store.js';

const tags = ['Browser pools'];

/** The BrowserPool object (CONTRACT §3); optional fields are absent rather than null. */
export function presentPool(row: PoolRow, region: string) {
  return {
    id: row.id,
    region,
    acquired_count: Number(row.acquired_count),
    available_count: Number(row.available_count),
    // Not in Kernel's BrowserPool: an extra field the SDK passes through (CONTRACT: extra response fields are allowed).
    starting_count: Number(row.starting_count),
    browser_pool_config: { ...row.config, size: row.size },
    created_at: row.created_at.toISOString(),
    extension_ids: row.extension_ids,
    ...(row.name !== null ? { name: row.name } : {}),
    ...(row.profile_id !== null ? { profile_id: row.profile_id } : {}),
  };
}

export function browserPoolRoutes(deps: AppDeps, services: AppServices): RouteDef[] {
  const { pools } = services;
  // Composed at each call, not once: tests swap deps.runtime on the live app.
  const poolDeps = (): PoolServiceDeps => ({ ...deps, pools });
  const { db } = deps;
  const tokens = createCdpTokens(deps);
  const present = (row: PoolRow) => presentPool(row, regionOf(deps.settings));
  return [
    defineRoute({
      method: 'post',
      path: '/browser_pools',
      operationId: 'createBrowserPool',
      summary: 'Create a pool of warm browsers in the resolved project',
      description: 'The sum of the sizes of the project’s pools is capped by its max_pooled_sessions, and the organisation’s by its session cap (409 pool_size_limit_exceeded).',
      tags,
      auth: 'project',
      body: createPoolHttpBody,
      responses: { 200: { description: 'The pool', schema: browserPoolSchema }, ...errorResponses(400, 404, 409) },
      handler: async ({ body, auth }) => json(present(await createPool(poolDeps(), projectScopeOf(auth), actorOf(auth), body))),
    }),
    defineRoute({
      method: 'get',
      path: '/browser_pools',
      operationId: 'listBrowserPools',
      summary: 'List pools of the resolved project, newest first',
      tags,
      auth: 'project',
      query: listPoolsQuery,
      responses: { 200: { description: 'A page of pools', schema: browserPoolSchema.array(), headers: paginationResponseHeaders }, ...errorResponses(400) },
      handler: async ({ query, auth }) => page(await listPools(db, projectScopeOf(auth), query), query, present),
    }),
    defineRoute({
      method: 'get',
      path: '/browser_pools/{id_or_name}',
      operationId: 'getBrowserPool',
      summary: 'Get a pool by id or name',
      tags,
      auth: 'project',
      params: poolIdParams,
      responses: { 200: { description: 'The pool', schema: browserPoolSchema }, ...errorResponses(404) },
      handler: async ({ params, auth }) => json(present(await getPool(db, projectScopeOf(auth), params.id_or_name))),
    }),
    defineRoute({
      method: 'patch',
      path: '/browser_pools/{id_or_name}',
      operationId: 'updateBrowserPool',
      summary: 'Change a pool’s configuration or size',
      description:
        'Each field sent replaces the stored one; it applies to browsers warmed from then on. ' +
        'A pool a Kubernetes BrowserPool resource manages is refused with 409 pool_managed_by_kubernetes: change the resource instead.',
      tags,
      auth: 'project',
      params: poolIdParams,
      body: updatePoolBody,
      responses: { 200: { description: 'The pool', schema: browserPoolSchema }, ...errorResponses(400, 404, 409) },
      handler: async ({ params, body, auth }) => {
        const scope = projectScopeOf(auth);
        const pool = await updatePoolSettings(poolDeps(), scope, actorOf(auth), params.id_or_name, body);
        // Read again: discard_all_idle changed the counts.
        return json(present(await getPool(db, scope, pool.id)));
      },
    }),
    defineRoute({
      method: 'delete',
      path: '/browser_pools/{id_or_name}',
      operationId: 'deleteBrowserPool',
      summary: 'Delete a pool and its browsers',
      description:
        'Refused with 409 while a browser is leased, unless the body is {"force": true}. ' +
        'A pool a Kubernetes BrowserPool resource manages is refused with 409 pool_managed_by_kubernetes: delete the resource instead.',
      tags,
      auth: 'project',
      params: poolIdParams,
      body: deletePoolBody,
      responses: { 204: { description: 'Deleted' }, ...errorResponses(400, 404, 409) },
      handler: async ({ params, body, auth }) => {
        await deletePool(poolDeps(), projectScopeOf(auth), actorOf(auth), params.id_or_name, { force: body.force === true });
        return noContent();
      },
    }),
    defineRoute({
      method: 'post',
      path: '/browser_pools/{id_or_name}/acquire',
      operationId: 'acquireBrowserPool',
      summary: 'Lease a warm browser from the pool (long poll)',
      description:
        `Answers at once with a browser when one is idle; otherwise waits, first come first served, until one is or acquire_timeout_seconds passes (held at most ${MAX_ACQUIRE_WAIT_SECONDS} s), then 204 with no body: retry to keep waiting. ` +
        'The lease’s name, tags, start_url and telemetry apply to this lease alone; its idle timeout is the pool’s timeout_seconds.',
      tags,
      auth: 'project',
      params: poolIdParams,
      body: acquirePoolBody,
      responses: {
        200: { description: 'The leased browser', schema: browserSessionSchema },
        204: { description: 'No browser became available in time (no body; Content-Type application/json)' },
        ...errorResponses(400, 404, 409),
      },
      handler: async ({ params, body, auth, req, res }) => {
        // The client leaving ends the wait (and gives back a browser leased for it).
        const gone = new AbortController();
        res.once('close', () => {
          if (!res.writableFinished) gone.abort();
        });
        const row = await pools.acquire(projectScopeOf(auth), params.id_or_name, body, gone.signal);
        // 204 with a Content-Type and no body: the Go SDK cannot read a 204 without one,
        // and every client tried (TS, Python, Go, the CLI) reads this as "none" (null).
        if (!row) return { kind: 'empty', status: 204, headers: { 'content-type': 'application/json' } };
        return json(await presentSession({ tokens, wsBase: publicWsBase(deps, req), now: deps.clock.now(), region: regionOf(deps.settings) }, row));
      },
    }),
    defineRoute({
      method: 'post',
      path: '/browser_pools/{id_or_name}/release',
      operationId: 'releaseBrowserPool',
      summary: 'Give a leased browser back to the pool',
      description: 'reuse true (default) resets the browser (its clients are disconnected, tabs and contexts closed, cookies back to the pool profile’s) and returns it to the pool; reuse false closes it and the pool warms a new one.',
      tags,
      auth: 'project',
      params: poolIdParams,
      body: releasePoolBody,
      responses: { 204: { description: 'Released' }, ...errorResponses(400, 404) },
      handler: async ({ params, body, auth }) => {
        await pools.release(projectScopeOf(auth), params.id_or_name, body);
        return noContent();
      },
    }),
    defineRoute({
      method: 'post',
      path: '/browser_pools/{id_or_name}/flush',
      operationId: 'flushBrowserPool',
      summary: 'Close the pool’s idle browsers',
      description: 'Leased browsers are not touched; the pool warms new idle browsers at its fill rate.',
      tags,
      auth: 'project',
      params: poolIdParams,
      responses: { 204: { description: 'Flushed' }, ...errorResponses(404) },
      handler: async ({ params, auth }) => {
        await pools.flush(projectScopeOf(auth), params.id_or_name);
        return noContent();
      },
    }),
  ];
}
