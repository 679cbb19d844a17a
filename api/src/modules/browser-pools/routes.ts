import type { AppDeps } from '../../app-deps.js';
import { requireProject, type AuthContext } from '../../http/auth-context.js';
import { page, paginationResponseHeaders } from '../../http/pagination.js';
import { defineRoute, json, noContent, type RouteDef } from '../../http/route.js';
import { errorResponses } from '../../http/standard-responses.js';
import { browserPoolSchema, createPoolBody, deletePoolBody, listPoolsQuery, poolIdParams, updatePoolBody } from './schema.js';
import { createPool, deletePool, getPool, updatePoolSettings } from './service.js';
import { listPools, type PoolRow, type PoolScope } from './store.js';

const tags = ['Browser pools'];
const scopeOf = (auth: AuthContext): PoolScope => ({ orgId: auth.orgId, projectId: requireProject(auth).id });

/** The BrowserPool object (CONTRACT §3); optional fields are absent rather than null. */
export function presentPool(row: PoolRow) {
  return {
    id: row.id,
    acquired_count: Number(row.acquired_count),
    available_count: Number(row.available_count),
    browser_pool_config: { ...row.config, size: row.size },
    created_at: row.created_at.toISOString(),
    extension_ids: [] as string[],
    ...(row.name !== null ? { name: row.name } : {}),
    ...(row.profile_id !== null ? { profile_id: row.profile_id } : {}),
  };
}

export function browserPoolRoutes(deps: AppDeps): RouteDef[] {
  const { db } = deps;
  return [
    defineRoute({
      method: 'post',
      path: '/browser_pools',
      operationId: 'createBrowserPool',
      summary: 'Create a pool of warm browsers in the resolved project',
      description: 'The sum of the sizes of the project’s pools is capped by its max_pooled_sessions, and the organisation’s by its session cap (409 pool_size_limit_exceeded).',
      tags,
      auth: 'project',
      body: createPoolBody,
      responses: { 200: { description: 'The pool', schema: browserPoolSchema }, ...errorResponses(400, 404, 409) },
      handler: async ({ body, auth }) => json(presentPool(await createPool(deps, scopeOf(auth), body))),
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
      handler: async ({ query, auth }) => page(await listPools(db, scopeOf(auth), query), query, presentPool),
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
      handler: async ({ params, auth }) => json(presentPool(await getPool(db, scopeOf(auth), params.id_or_name))),
    }),
    defineRoute({
      method: 'patch',
      path: '/browser_pools/{id_or_name}',
      operationId: 'updateBrowserPool',
      summary: 'Change a pool’s configuration or size',
      description: 'Each field sent replaces the stored one; it applies to browsers warmed from then on.',
      tags,
      auth: 'project',
      params: poolIdParams,
      body: updatePoolBody,
      responses: { 200: { description: 'The pool', schema: browserPoolSchema }, ...errorResponses(400, 404, 409) },
      handler: async ({ params, body, auth }) => json(presentPool(await updatePoolSettings(deps, scopeOf(auth), params.id_or_name, body))),
    }),
    defineRoute({
      method: 'delete',
      path: '/browser_pools/{id_or_name}',
      operationId: 'deleteBrowserPool',
      summary: 'Delete a pool and its browsers',
      description: 'Refused with 409 while a browser is leased, unless the body is {"force": true}.',
      tags,
      auth: 'project',
      params: poolIdParams,
      body: deletePoolBody,
      responses: { 204: { description: 'Deleted' }, ...errorResponses(400, 404, 409) },
      handler: async ({ params, body, auth }) => {
        await deletePool(deps, scopeOf(auth), params.id_or_name, { force: body.force === true });
        return noContent();
      },
    }),
  ];
}
