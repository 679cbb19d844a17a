import type { AppDeps } from '../../app-deps.js';
import { page, paginationResponseHeaders } from '../../http/pagination.js';
import { defineRoute, json, noContent, type RouteDef } from '../../http/route.js';
import { errorResponses } from '../../http/standard-responses.js';
import { orgScopeOf } from '../../scope.js';
import { listProviderItems, testProvider } from './lookup.js';
import {
  createProviderBody,
  listProvidersQuery,
  providerItemsSchema,
  providerParams,
  providerSchema,
  providerTestSchema,
  updateProviderBody,
} from './schema.js';
import { changeProvider, createProvider, getProvider, presentProvider, removeProvider } from './service.js';
import { listProviders } from './store.js';

const tags = ['Credential providers'];

export function credentialProviderRoutes(deps: AppDeps): RouteDef[] {
  return [
    defineRoute({
      method: 'post',
      path: '/org/credential_providers',
      operationId: 'createCredentialProvider',
      summary: 'Configure a 1Password Connect server as a credential provider; its token is sealed and never returned',
      tags,
      auth: 'org',
      body: createProviderBody,
      responses: { 200: { description: 'The provider', schema: providerSchema }, ...errorResponses(400, 409) },
      handler: async ({ body, auth }) => json(presentProvider(await createProvider(deps, orgScopeOf(auth), body))),
    }),
    defineRoute({
      method: 'get',
      path: '/org/credential_providers',
      operationId: 'listCredentialProviders',
      summary: 'List the organisation’s credential providers, lowest priority first, then newest',
      tags,
      auth: 'org',
      query: listProvidersQuery,
      responses: {
        200: { description: 'A page of providers', schema: providerSchema.array(), headers: paginationResponseHeaders },
        ...errorResponses(400),
      },
      handler: async ({ query, auth }) => page(await listProviders(deps.db, auth.orgId, query), query, presentProvider),
    }),
    defineRoute({
      method: 'get',
      path: '/org/credential_providers/{id}',
      operationId: 'getCredentialProvider',
      summary: 'Get a credential provider by id or name (never its token)',
      tags,
      auth: 'org',
      params: providerParams,
      responses: { 200: { description: 'The provider', schema: providerSchema }, ...errorResponses(404) },
      handler: async ({ params, auth }) => json(presentProvider(await getProvider(deps.db, orgScopeOf(auth), params.id))),
    }),
    defineRoute({
      method: 'patch',
      path: '/org/credential_providers/{id}',
      operationId: 'updateCredentialProvider',
      summary: 'Rename a credential provider, rotate its token, or change its server, cache lifetime, enabled flag or priority',
      tags,
      auth: 'org',
      params: providerParams,
      body: updateProviderBody,
      responses: { 200: { description: 'The provider', schema: providerSchema }, ...errorResponses(400, 404, 409) },
      handler: async ({ params, body, auth }) => json(presentProvider(await changeProvider(deps, orgScopeOf(auth), params.id, body))),
    }),
    defineRoute({
      method: 'delete',
      path: '/org/credential_providers/{id}',
      operationId: 'deleteCredentialProvider',
      summary: 'Delete a credential provider and its sealed token; connections naming it fail their next login',
      tags,
      auth: 'org',
      params: providerParams,
      responses: { 204: { description: 'Deleted' }, ...errorResponses(404) },
      handler: async ({ params, auth }) => {
        await removeProvider(deps, orgScopeOf(auth), params.id);
        return noContent();
      },
    }),
    defineRoute({
      method: 'get',
      path: '/org/credential_providers/{id}/items',
      operationId: 'listCredentialProviderItems',
      summary: 'The login items of every vault the provider’s token can read (never their values)',
      tags,
      auth: 'org',
      params: providerParams,
      responses: { 200: { description: 'The items', schema: providerItemsSchema }, ...errorResponses(404, 424) },
      handler: async ({ params, auth }) => json(await listProviderItems(deps, orgScopeOf(auth), params.id)),
    }),
    defineRoute({
      method: 'post',
      path: '/org/credential_providers/{id}/test',
      operationId: 'testCredentialProvider',
      summary: 'Check the token against the Connect server by listing its vaults; a failure is a 200 with success false',
      tags,
      auth: 'org',
      params: providerParams,
      responses: { 200: { description: 'The result', schema: providerTestSchema }, ...errorResponses(404) },
      handler: async ({ params, auth }) => json(await testProvider(deps, orgScopeOf(auth), params.id)),
    }),
  ];
}
