import type { AppDeps } from '../../app-deps.js';
import { page, paginationResponseHeaders } from '../../http/pagination.js';
import { defineRoute, json, noContent, type RouteDef } from '../../http/route.js';
import { errorResponses } from '../../http/standard-responses.js';
import { actorOf, orgScopeOf } from '../../scope.js';
import {
  apiKeyIdParams,
  apiKeySchema,
  createApiKeyBody,
  createdApiKeySchema,
  listApiKeysQuery,
  retrieveApiKeyQuery,
  rotateApiKeyBody,
  updateApiKeyBody,
} from './schema.js';
import { createApiKey, deleteKey, getApiKey, presentApiKey, presentCreatedApiKey, renameKey, rotateKey } from './service.js';
import { listApiKeys } from './store.js';

const tags = ['API keys'];

export function apiKeyRoutes({ db, clock }: AppDeps): RouteDef[] {
  return [
    defineRoute({
      method: 'post',
      path: '/org/api_keys',
      operationId: 'createApiKey',
      summary: 'Create an API key; the plaintext key is returned only in this response',
      tags,
      auth: 'org',
      body: createApiKeyBody,
      responses: { 200: { description: 'The new key, with its plaintext', schema: createdApiKeySchema }, ...errorResponses(400, 404) },
      handler: async ({ body, auth }) => {
        const { row, plaintext } = await createApiKey(db, clock, orgScopeOf(auth), actorOf(auth), body);
        return json(presentCreatedApiKey(row, plaintext));
      },
    }),
    defineRoute({
      method: 'get',
      path: '/org/api_keys',
      operationId: 'listApiKeys',
      summary: 'List API keys of the organisation',
      tags,
      auth: 'org',
      query: listApiKeysQuery,
      responses: {
        200: {
          description: 'A page of keys',
          schema: apiKeySchema.array(),
          headers: paginationResponseHeaders,
        },
        ...errorResponses(400),
      },
      handler: async ({ query, auth }) => {
        const status = query.status ?? (query.include_deleted ? 'all' : 'active');
        const rows = await listApiKeys(db, auth.orgId, {
          name: query.name,
          query: query.query,
          status,
          sortBy: query.sort_by,
          sortDirection: query.sort_direction,
          limit: query.limit,
          offset: query.offset,
        });
        return page(rows, query, presentApiKey);
      },
    }),
    defineRoute({
      method: 'get',
      path: '/org/api_keys/{id}',
      operationId: 'getApiKey',
      summary: 'Get an API key',
      tags,
      auth: 'org',
      params: apiKeyIdParams,
      query: retrieveApiKeyQuery,
      responses: { 200: { description: 'The key', schema: apiKeySchema }, ...errorResponses(400, 404) },
      handler: async ({ params, query, auth }) =>
        json(presentApiKey(await getApiKey(db, orgScopeOf(auth), params.id, query.include_deleted ?? false))),
    }),
    defineRoute({
      method: 'patch',
      path: '/org/api_keys/{id}',
      operationId: 'updateApiKey',
      summary: 'Rename an API key',
      tags,
      auth: 'org',
      params: apiKeyIdParams,
      body: updateApiKeyBody,
      responses: { 200: { description: 'The key', schema: apiKeySchema }, ...errorResponses(400, 404) },
      handler: async ({ params, body, auth }) => json(presentApiKey(await renameKey(db, orgScopeOf(auth), params.id, body.name))),
    }),
    defineRoute({
      method: 'delete',
      path: '/org/api_keys/{id}',
      operationId: 'deleteApiKey',
      summary: 'Delete an API key; a key cannot delete itself',
      tags,
      auth: 'org',
      params: apiKeyIdParams,
      responses: { 204: { description: 'Deleted' }, ...errorResponses(404, 409) },
      handler: async ({ params, auth }) => {
        await deleteKey(db, clock, orgScopeOf(auth), actorOf(auth), params.id);
        return noContent();
      },
    }),
    defineRoute({
      method: 'post',
      path: '/org/api_keys/{id}/rotate',
      operationId: 'rotateApiKey',
      summary: 'Issue a successor key and give the old one a grace period',
      tags,
      auth: 'org',
      params: apiKeyIdParams,
      body: rotateApiKeyBody,
      responses: { 200: { description: 'The new key, with its plaintext', schema: createdApiKeySchema }, ...errorResponses(400, 404) },
      handler: async ({ params, body, auth }) => {
        const { row, plaintext } = await rotateKey(db, clock, orgScopeOf(auth), actorOf(auth), params.id, body);
        return json(presentCreatedApiKey(row, plaintext));
      },
    }),
  ];
}
