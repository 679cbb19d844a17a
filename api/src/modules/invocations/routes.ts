import type { AppDeps } from '../../app-deps.js';
import { createRowFollower, DEFAULT_SSE_HEARTBEAT_MS } from '../../events/follow-row.js';
import { page, paginationResponseHeaders } from '../../http/pagination.js';
import { defineRoute, json, noContent, type RouteDef } from '../../http/route.js';
import { errorResponses } from '../../http/standard-responses.js';
import { projectScopeOf } from '../../scope.js';
import { noInvocationBrowsers, type InvocationBrowsers } from './browsers.js';
import { followInvocation } from './events.js';
import {
  createInvocationBody,
  followInvocationQuery,
  invocationBrowsersSchema,
  invocationCreatedSchema,
  invocationEventSchema,
  invocationIdParams,
  invocationSchema,
  listInvocationsQuery,
  updateInvocationBody,
} from './schema.js';
import { createInvocation, getInvocation, presentInvocation, presentInvocationCreated, updateInvocation } from './service.js';
import { resolveSince } from './since.js';
import { listInvocations } from './store.js';
import { findLiveAppVersion } from './app-versions.js';
import { actionNotFound, startRun, SYNC_WAIT_MS, waitForRun } from './runs.js';
import { startKubeRun, waitForEnd } from './kube-runs.js';

const tags = ['Invocations'];

/** The heartbeat of event streams when AppSettings.sseHeartbeatMs is unset (the load benchmark prints it). */
export const DEFAULT_HEARTBEAT_MS = DEFAULT_SSE_HEARTBEAT_MS;

export interface InvocationRouteOptions {
  /** The browsers invocations own (default: none, until browser sessions exist). */
  browsers?: InvocationBrowsers;
}

export function invocationRoutes(deps: AppDeps, options: InvocationRouteOptions = {}): RouteDef[] {
  const { db } = deps;
  // One per mount: the event streams of these routes share their re-reads.
  const follower = createRowFollower(deps);
  const browsers = options.browsers ?? noInvocationBrowsers;
  return [
    defineRoute({
      method: 'post',
      path: '/invocations',
      operationId: 'createInvocation',
      summary: 'Invoke an action: runs it when the app version is deployed here, else records a queued invocation for an outside runner',
      description:
        'For a deployed app version (POST /deployments), the service runs the action: async true answers 202 queued at once; ' +
        `otherwise the answer waits for the end of the run, at most ${SYNC_WAIT_MS / 1000} s, then gives the invocation as it is (running). ` +
        'An action the deployed app does not register is a 404 action_not_found. ' +
        'For an app version not deployed here, the invocation is recorded queued for an outside runner to PATCH (200, or 202 with async). ' +
        'The project’s max_concurrent_invocations caps queued and running invocations (429 concurrency_limit_exceeded).',
      tags,
      auth: 'project',
      body: createInvocationBody,
      responses: {
        200: { description: 'Created (sync request): finished, or still running past the wait; queued when not deployed here', schema: invocationCreatedSchema },
        202: { description: 'Created (async request), queued', schema: invocationCreatedSchema },
        ...errorResponses(400, 404, 429),
      },
      handler: async ({ body, auth }) => {
        const scope = projectScopeOf(auth);
        const version = await findLiveAppVersion(db, scope, body.app_name, body.version);
        if (!version) {
          const row = await createInvocation(deps, scope, body);
          return json(presentInvocationCreated(row), body.async === true ? 202 : 200);
        }
        if (!version.actions.some((action) => action.name === body.action_name)) throw actionNotFound(version, body.action_name);
        const row = await createInvocation(deps, scope, body, version.deployment_id);
        // Kubernetes mode: a Job runs it; embedded: this process does.
        const kubernetes = deps.settings.apps?.kubernetes !== undefined;
        if (kubernetes) await startKubeRun(deps, scope, row, version);
        else void startRun(deps, browsers, scope, row, version);
        if (body.async === true) return json(presentInvocationCreated(row), 202);
        const waitMs = deps.settings.invocationSyncWaitMs ?? SYNC_WAIT_MS;
        if (kubernetes) await waitForEnd(deps, scope, row.id, waitMs);
        else await waitForRun(deps, row.id, waitMs);
        return json(presentInvocationCreated(await getInvocation(db, scope, row.id)), 200);
      },
    }),
    defineRoute({
      method: 'get',
      path: '/invocations',
      operationId: 'listInvocations',
      summary: 'List invocations, newest first',
      tags,
      auth: 'project',
      query: listInvocationsQuery,
      responses: {
        200: { description: 'A page of invocations', schema: invocationSchema.array(), headers: paginationResponseHeaders },
        ...errorResponses(400),
      },
      handler: async ({ query, auth }) => {
        const rows = await listInvocations(db, projectScopeOf(auth), {
          appName: query.app_name,
          actionName: query.action_name,
          version: query.version,
          deploymentId: query.deployment_id,
          status: query.status,
          since: query.since === undefined ? undefined : resolveSince(query.since, deps.clock.now()),
          query: query.query,
          limit: query.limit,
          offset: query.offset,
        });
        return page(rows, query, presentInvocation);
      },
    }),
    defineRoute({
      method: 'get',
      path: '/invocations/{id}',
      operationId: 'getInvocation',
      summary: 'Get an invocation',
      tags,
      auth: 'project',
      params: invocationIdParams,
      responses: { 200: { description: 'The invocation', schema: invocationSchema }, ...errorResponses(400, 404) },
      handler: async ({ params, auth }) => json(presentInvocation(await getInvocation(db, projectScopeOf(auth), params.id))),
    }),
    defineRoute({
      method: 'patch',
      path: '/invocations/{id}',
      operationId: 'updateInvocation',
      summary: 'Finish an invocation (succeeded or failed, which also cancels), or mark it running',
      tags,
      auth: 'project',
      params: invocationIdParams,
      body: updateInvocationBody,
      responses: {
        200: { description: 'The invocation', schema: invocationSchema },
        ...errorResponses(400, 404, 409),
      },
      handler: async ({ params, body, auth }) =>
        json(presentInvocation(await updateInvocation(deps, projectScopeOf(auth), params.id, body))),
    }),
    defineRoute({
      method: 'get',
      path: '/invocations/{id}/browsers',
      operationId: 'listInvocationBrowsers',
      summary: 'Active browser sessions created within the invocation',
      tags,
      auth: 'project',
      params: invocationIdParams,
      responses: { 200: { description: 'The sessions', schema: invocationBrowsersSchema }, ...errorResponses(400, 404) },
      handler: async ({ params, auth }) => {
        const scope = projectScopeOf(auth);
        const invocation = await getInvocation(db, scope, params.id);
        return json({ browsers: await browsers.listActive(db, scope, invocation.id) });
      },
    }),
    defineRoute({
      method: 'delete',
      path: '/invocations/{id}/browsers',
      operationId: 'deleteInvocationBrowsers',
      summary: 'Delete every browser session created within the invocation',
      tags,
      auth: 'project',
      params: invocationIdParams,
      responses: { 204: { description: 'Deleted' }, ...errorResponses(400, 404) },
      handler: async ({ params, auth }) => {
        const scope = projectScopeOf(auth);
        const invocation = await getInvocation(db, scope, params.id);
        await browsers.deleteAll(scope, invocation.id);
        return noContent();
      },
    }),
    defineRoute({
      method: 'get',
      path: '/invocations/{id}/events',
      operationId: 'followInvocation',
      summary: 'Server-Sent Events: the invocation’s state now and at each change, until it finishes',
      description:
        'Every frame is a data line with a JSON object whose event field names it: log (a line of the run\'s stdout or stderr), invocation_state, sse_heartbeat, error. ' +
        'Log lines at or after since (all without it) come first, then new ones as they are written. ' +
        'The server closes the stream once the invocation is succeeded or failed.',
      tags,
      auth: 'project',
      params: invocationIdParams,
      query: followInvocationQuery,
      responses: {
        200: { description: 'An event stream', schema: invocationEventSchema, contentType: 'text/event-stream' },
        ...errorResponses(400, 404),
      },
      handler: async ({ params, query, auth, req, res }) => {
        const since = query.since === undefined ? undefined : resolveSince(query.since, deps.clock.now());
        await followInvocation(deps, follower, projectScopeOf(auth), params.id, { req, res }, { since });
        return { kind: 'handled' };
      },
    }),
  ];
}
