import type { AppDeps } from '../../app-deps.js';
import { page, paginationResponseHeaders } from '../../http/pagination.js';
import { defineRoute, json, noContent, type RouteDef } from '../../http/route.js';
import { errorResponses } from '../../http/standard-responses.js';
import { projectScopeOf } from '../../scope.js';
import { checkProxyBody, createProxyBody, listProxiesQuery, proxyIdParams, proxySchema, updateProxyBody } from './schema.js';
import {
  checkProxy,
  createProxy,
  deleteProjectProxy,
  getProxy,
  listProjectProxies,
  presentProxy,
  renameProjectProxy,
} from './service.js';

const tags = ['Proxies'];

export function proxyRoutes(deps: AppDeps): RouteDef[] {
  return [
    defineRoute({
      method: 'post',
      path: '/proxies',
      operationId: 'createProxy',
      summary: 'Create a proxy configuration in the resolved project',
      description:
        'Managed types (datacenter, isp, residential, mobile) are served by an upstream the operator configured; ' +
        'a request no upstream can serve is a 400 no_matching_upstream. Custom proxies need config.host and config.port.',
      tags,
      auth: 'project',
      body: createProxyBody,
      responses: { 200: { description: 'The proxy', schema: proxySchema }, ...errorResponses(400, 404) },
      handler: async ({ body, auth }) => json(presentProxy(await createProxy(deps, projectScopeOf(auth), body))),
    }),
    defineRoute({
      method: 'get',
      path: '/proxies',
      operationId: 'listProxies',
      summary: 'List proxies of the resolved project, newest first',
      tags,
      auth: 'project',
      query: listProxiesQuery,
      responses: {
        200: { description: 'A page of proxies', schema: proxySchema.array(), headers: paginationResponseHeaders },
        ...errorResponses(400),
      },
      handler: async ({ query, auth }) => page(await listProjectProxies(deps, projectScopeOf(auth), query), query, (row) => presentProxy(row)),
    }),
    defineRoute({
      method: 'get',
      path: '/proxies/{id}',
      operationId: 'getProxy',
      summary: 'Get a proxy by id',
      tags,
      auth: 'project',
      params: proxyIdParams,
      responses: { 200: { description: 'The proxy', schema: proxySchema }, ...errorResponses(404) },
      handler: async ({ params, auth }) => json(presentProxy(await getProxy(deps, projectScopeOf(auth), params.id))),
    }),
    defineRoute({
      method: 'patch',
      path: '/proxies/{id}',
      operationId: 'updateProxy',
      summary: 'Rename a proxy (names are not unique)',
      tags,
      auth: 'project',
      params: proxyIdParams,
      body: updateProxyBody,
      responses: { 200: { description: 'The proxy', schema: proxySchema }, ...errorResponses(400, 404) },
      handler: async ({ params, body, auth }) => json(presentProxy(await renameProjectProxy(deps, projectScopeOf(auth), params.id, body.name))),
    }),
    defineRoute({
      method: 'delete',
      path: '/proxies/{id}',
      operationId: 'deleteProxy',
      summary: 'Soft-delete a proxy; sessions that use it are untouched',
      tags,
      auth: 'project',
      params: proxyIdParams,
      responses: { 204: { description: 'Deleted' }, ...errorResponses(404) },
      handler: async ({ params, auth }) => {
        await deleteProjectProxy(deps, projectScopeOf(auth), params.id);
        return noContent();
      },
    }),
    defineRoute({
      method: 'post',
      path: '/proxies/{id}/check',
      operationId: 'checkProxy',
      summary: 'Fetch the check URL (or the given url) through the proxy and report its health',
      tags,
      auth: 'project',
      params: proxyIdParams,
      body: checkProxyBody,
      responses: { 200: { description: 'The proxy with the check result', schema: proxySchema }, ...errorResponses(400, 404) },
      handler: async ({ params, body, auth }) => json(await checkProxy(deps, projectScopeOf(auth), params.id, body.url)),
    }),
  ];
}
