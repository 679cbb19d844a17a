import type { AppDeps } from '../../app-deps.js';
import { page, paginationResponseHeaders } from '../../http/pagination.js';
import { defineRoute, json, noContent, type RouteDef } from '../../http/route.js';
import { errorResponses } from '../../http/standard-responses.js';
import { projectScopeOf } from '../../scope.js';
import {
  createCredentialBody,
  credentialParams,
  credentialSchema,
  listCredentialsQuery,
  totpCodeSchema,
  updateCredentialBody,
} from './schema.js';
import {
  changeCredential,
  createCredential,
  currentTotpCode,
  getCredential,
  presentCredential,
  presentListedCredential,
  removeCredential,
} from './service.js';
import { listCredentials } from './store.js';

const tags = ['Credentials'];

export function credentialRoutes(deps: AppDeps): RouteDef[] {
  return [
    defineRoute({
      method: 'post',
      path: '/credentials',
      operationId: 'createCredential',
      summary: 'Store a credential; its values and TOTP secret are sealed and never returned',
      tags,
      auth: 'project',
      body: createCredentialBody,
      responses: { 200: { description: 'The credential', schema: credentialSchema }, ...errorResponses(400, 409) },
      handler: async ({ body, auth }) => json(presentCredential(await createCredential(deps, projectScopeOf(auth), body))),
    }),
    defineRoute({
      method: 'get',
      path: '/credentials',
      operationId: 'listCredentials',
      summary: 'List the project’s credentials, newest first (no value names)',
      tags,
      auth: 'project',
      query: listCredentialsQuery,
      responses: {
        200: { description: 'A page of credentials', schema: credentialSchema.array(), headers: paginationResponseHeaders },
        ...errorResponses(400),
      },
      handler: async ({ query, auth }) =>
        page(
          await listCredentials(deps.db, projectScopeOf(auth), query),
          query,
          presentListedCredential,
        ),
    }),
    defineRoute({
      method: 'get',
      path: '/credentials/{id_or_name}',
      operationId: 'getCredential',
      summary: 'Get a credential by id or name (never its values)',
      tags,
      auth: 'project',
      params: credentialParams,
      responses: { 200: { description: 'The credential', schema: credentialSchema }, ...errorResponses(404) },
      handler: async ({ params, auth }) => json(presentCredential({ row: await getCredential(deps, projectScopeOf(auth), params.id_or_name) })),
    }),
    defineRoute({
      method: 'patch',
      path: '/credentials/{id_or_name}',
      operationId: 'updateCredential',
      summary: 'Rename a credential or change its values (removals first, then a merge), SSO provider or TOTP secret',
      tags,
      auth: 'project',
      params: credentialParams,
      body: updateCredentialBody,
      responses: { 200: { description: 'The credential', schema: credentialSchema }, ...errorResponses(400, 404, 409) },
      handler: async ({ params, body, auth }) =>
        json(presentCredential(await changeCredential(deps, projectScopeOf(auth), params.id_or_name, body))),
    }),
    defineRoute({
      method: 'delete',
      path: '/credentials/{id_or_name}',
      operationId: 'deleteCredential',
      summary: 'Delete a credential and its sealed secrets; its name becomes free',
      tags,
      auth: 'project',
      params: credentialParams,
      responses: { 204: { description: 'Deleted' }, ...errorResponses(404) },
      handler: async ({ params, auth }) => {
        await removeCredential(deps, projectScopeOf(auth), params.id_or_name);
        return noContent();
      },
    }),
    defineRoute({
      method: 'get',
      path: '/credentials/{id_or_name}/totp-code',
      operationId: 'getCredentialTotpCode',
      summary: 'The current 6-digit TOTP code of a credential with a TOTP secret',
      tags,
      auth: 'project',
      params: credentialParams,
      responses: {
        200: { description: 'The code and the end of its 30-second step', schema: totpCodeSchema },
        ...errorResponses(404, 409),
      },
      handler: async ({ params, auth }) => {
        const { code, expiresAt } = await currentTotpCode(deps, projectScopeOf(auth), params.id_or_name);
        return json({ code, expires_at: expiresAt.toISOString() });
      },
    }),
  ];
}
