import { z } from 'zod';
import type { AppDeps } from '../../app-deps.js';
import type { AppServices } from '../../app-services.js';
import { page, paginationResponseHeaders } from '../../http/pagination.js';
import { defineRoute, json, noContent, type RouteDef } from '../../http/route.js';
import { errorResponses } from '../../http/standard-responses.js';
import { requireProject, type AuthContext } from '../../http/auth-context.js';
import { actorOf, projectScopeOf } from '../../scope.js';
import { createRowFollower } from '../../events/follow-row.js';
import { followFlow } from './events.js';
import {
  connectionParams,
  connectionSchema,
  createConnectionHttpBody,
  listConnectionsQuery,
  loginBody,
  loginResponseSchema,
  submitBody,
  submitResponseSchema,
  timelineEventSchema,
  timelineQuery,
  updateConnectionBody,
} from './schema.js';
import {
  changeConnection,
  createConnection,
  getConnection,
  presentLogin,
  type NamedProjectScope,
  removeConnection,
  resolveProxyRef,
  viewContext,
} from './service.js';
import { listTimeline } from './history-store.js';
import { findConnection, listConnections } from './store.js';
import { submitToFlow } from './submission.js';
import { liveViewUrl, presentConnection, presentTimelineEvent } from './view.js';

const tags = ['Managed auth'];

/** The request's project scope, with the project's name for a not-found message. */
const namedScopeOf = (auth: AuthContext): NamedProjectScope => ({ ...projectScopeOf(auth), projectName: requireProject(auth).name });

const stateEventSchema = z
  .object({
    event: z.enum(['managed_auth_state', 'sse_heartbeat', 'error']),
    timestamp: z.string(),
  })
  .passthrough()
  .meta({ id: 'ManagedAuthEvent' });

export function authConnectionRoutes(deps: AppDeps, services: AppServices): RouteDef[] {
  // One per mount: streams of the same connection share their re-reads.
  const follower = createRowFollower(deps);
  return [
    defineRoute({
      method: 'post',
      path: '/auth/connections',
      operationId: 'createAuthConnection',
      summary: 'Create a managed auth connection: keep a profile logged into a domain (the profile is created when missing)',
      tags,
      auth: 'project',
      body: createConnectionHttpBody,
      responses: { 200: { description: 'The connection', schema: connectionSchema }, ...errorResponses(400, 404, 409) },
      handler: async ({ body, auth, req }) => json(await presentConnection(viewContext(deps, req), await createConnection(deps, namedScopeOf(auth), actorOf(auth), body))),
    }),
    defineRoute({
      method: 'get',
      path: '/auth/connections',
      operationId: 'listAuthConnections',
      summary: 'List the project’s auth connections, newest first',
      tags,
      auth: 'project',
      query: listConnectionsQuery,
      responses: {
        200: { description: 'A page of connections', schema: connectionSchema.array(), headers: paginationResponseHeaders },
        ...errorResponses(400),
      },
      handler: async ({ query, auth, req }) => {
        const rows = await listConnections(deps.db, projectScopeOf(auth), query);
        const ctx = viewContext(deps, req);
        const presented = await Promise.all(rows.slice(0, query.limit).map((row) => presentConnection(ctx, row)));
        return page(rows.length > query.limit ? [...presented, undefined] : presented, query, (item) => item);
      },
    }),
    defineRoute({
      method: 'get',
      path: '/auth/connections/{id}',
      operationId: 'getAuthConnection',
      summary: 'Get an auth connection, with the state of its current login flow',
      tags,
      auth: 'project',
      params: connectionParams,
      responses: { 200: { description: 'The connection', schema: connectionSchema }, ...errorResponses(404) },
      handler: async ({ params, auth, req }) => json(await presentConnection(viewContext(deps, req), await getConnection(deps, projectScopeOf(auth), params.id))),
    }),
    defineRoute({
      method: 'patch',
      path: '/auth/connections/{id}',
      operationId: 'updateAuthConnection',
      summary: 'Change an auth connection; only the fields sent change',
      description:
        'A connection a Kubernetes AuthConnection resource manages is refused with 409 auth_connection_managed_by_kubernetes: change the resource instead.',
      tags,
      auth: 'project',
      params: connectionParams,
      body: updateConnectionBody,
      responses: { 200: { description: 'The connection', schema: connectionSchema }, ...errorResponses(400, 404, 409) },
      handler: async ({ params, body, auth, req }) =>
        json(await presentConnection(viewContext(deps, req), await changeConnection(deps, projectScopeOf(auth), actorOf(auth), params.id, body))),
    }),
    defineRoute({
      method: 'delete',
      path: '/auth/connections/{id}',
      operationId: 'deleteAuthConnection',
      summary: 'Delete an auth connection: its health checks stop and a login in progress is canceled',
      description:
        'A connection a Kubernetes AuthConnection resource manages is refused with 409 auth_connection_managed_by_kubernetes: delete the resource instead.',
      tags,
      auth: 'project',
      params: connectionParams,
      responses: { 204: { description: 'Deleted' }, ...errorResponses(404, 409) },
      handler: async ({ params, auth }) => {
        await removeConnection(deps, projectScopeOf(auth), actorOf(auth), params.id);
        return noContent();
      },
    }),
    defineRoute({
      method: 'post',
      path: '/auth/connections/{id}/login',
      operationId: 'loginAuthConnection',
      summary: 'Start a login flow: a browser on the profile opens the login page; answer with the hosted page or submit',
      description:
        'Returns at once with the hosted login page URL (its one-time handoff code in the fragment) and the live view. ' +
        'With a stored credential the flow fills what it can by itself, generating TOTP codes. Follow it with GET …/events.',
      tags,
      auth: 'project',
      params: connectionParams,
      body: loginBody,
      responses: {
        200: { description: 'The flow', schema: loginResponseSchema },
        ...errorResponses(400, 404, 409, 429),
      },
      handler: async ({ params, body, auth, req }) => {
        const scope = projectScopeOf(auth);
        const proxyId = body.proxy ? await resolveProxyRef(deps.db, scope, body.proxy) : undefined;
        const started = await services.flows.begin(scope, params.id, 'LOGIN', { proxyId, telemetry: body.browser_telemetry });
        const ctx = viewContext(deps, req);
        return json(presentLogin(ctx, started.row, started.handoffCode, await liveViewUrl(ctx, started.sessionId)));
      },
    }),
    defineRoute({
      method: 'post',
      path: '/auth/connections/{id}/submit',
      operationId: 'submitAuthConnection',
      summary: 'Answer the current step of the login flow: field values by Field.id, or one choice',
      tags,
      auth: 'project',
      params: connectionParams,
      body: submitBody,
      responses: {
        200: { description: 'Whether the flow took it', schema: submitResponseSchema },
        ...errorResponses(400, 404, 409),
      },
      handler: async ({ params, body, auth }) => {
        const row = await getConnection(deps, projectScopeOf(auth), params.id);
        return json({ accepted: await submitToFlow(deps, row, body) });
      },
    }),
    defineRoute({
      method: 'get',
      path: '/auth/connections/{id}/events',
      operationId: 'followAuthConnection',
      summary: 'Server-Sent Events: the login flow’s state now and at each change, until it ends',
      description:
        'Every frame is a data line with a JSON object whose event field names it: managed_auth_state, sse_heartbeat, error. ' +
        'The server closes the stream once the flow is SUCCESS, FAILED, EXPIRED or CANCELED.',
      tags,
      auth: 'project',
      params: connectionParams,
      responses: {
        200: { description: 'An event stream', schema: stateEventSchema, contentType: 'text/event-stream' },
        ...errorResponses(404),
      },
      handler: async ({ params, auth, req, res }) => {
        const scope = projectScopeOf(auth);
        // Before any header goes out, so an unknown id is an ordinary 404.
        await getConnection(deps, scope, params.id);
        const source = async () => {
          const row = await findConnection(deps.db, scope, params.id);
          return row ? row.flow : ('gone' as const);
        };
        await followFlow(deps, params.id, source, viewContext(deps, req), { req, res }, {
          follower,
          sharedReadKey: `auth-connection:${scope.orgId}/${scope.projectId}/${params.id}`,
        });
        return { kind: 'handled' };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/auth/connections/{id}/timeline',
      operationId: 'getAuthConnectionTimeline',
      summary: 'Login, re-auth and health-check history of a connection, newest first',
      tags,
      auth: 'project',
      params: connectionParams,
      query: timelineQuery,
      responses: {
        200: { description: 'A page of timeline events', schema: timelineEventSchema.array(), headers: paginationResponseHeaders },
        ...errorResponses(400, 404),
      },
      handler: async ({ params, query, auth }) => {
        const row = await getConnection(deps, projectScopeOf(auth), params.id);
        return page(await listTimeline(deps.db, row.id, query), query, presentTimelineEvent);
      },
    }),
  ];
}
