import type { AppDeps } from '../../app-deps.js';
import type { RowFollower } from '../../events/follow-row.js';
import { page, paginationResponseHeaders } from '../../http/pagination.js';
import { defineRoute, json, noContent, type RouteDef } from '../../http/route.js';
import { errorResponses } from '../../http/standard-responses.js';
import { projectScopeOf } from '../../scope.js';
import { resolveSince } from '../invocations/since.js';
import type { Builds } from './deployments-service.js';
import { followDeployment } from './deployment-events.js';
import {
  deploymentEventSchema,
  deploymentIdParams,
  deploymentJsonSchema,
  deploymentSchema,
  followDeploymentQuery,
  listDeploymentsQuery,
  presentDeployment,
} from './deployments-schema.js';
import { createDeployment, deleteDeployment, getDeployment } from './deployments-service.js';
import { listDeployments } from './deployments-store.js';

const tags = ['Deployments'];

export function deploymentRoutes(deps: AppDeps, queue: Builds | undefined, follower: RowFollower): RouteDef[] {
  const { db } = deps;
  return [
    defineRoute({
      method: 'post',
      path: '/deployments',
      operationId: 'createDeployment',
      summary: 'Deploy an app: upload a file or a zip, or name a git source; the build runs in the background',
      description:
        'multipart/form-data: file (a .js/.mjs/.cjs/.ts file or a zip), entrypoint_rel_path, version (default latest), force (true/false), ' +
        'region (aws.us-east-1a), env_vars[KEY] or env_vars.KEY fields; or source, a JSON object {type: github, url, ref, entrypoint, path?, auth?} ' +
        '(or its fields as source[url], source[auth][token] or source.url, source.auth.token). ' +
        'A git source may also be sent as application/json. Answers the queued deployment; follow GET /deployments/{id}/events for the build.',
      tags,
      auth: 'project',
      bodyType: 'multipart',
      jsonAlternative: deploymentJsonSchema,
      responses: {
        200: { description: 'Queued', schema: deploymentSchema },
        ...errorResponses(400, 404, 413, 415, 503),
      },
      handler: async ({ auth, req }) => json(presentDeployment(await createDeployment(deps, queue, projectScopeOf(auth), req))),
    }),
    defineRoute({
      method: 'get',
      path: '/deployments',
      operationId: 'listDeployments',
      summary: 'List deployments, newest first',
      tags,
      auth: 'project',
      query: listDeploymentsQuery,
      responses: {
        200: { description: 'A page of deployments', schema: deploymentSchema.array(), headers: paginationResponseHeaders },
        ...errorResponses(400),
      },
      handler: async ({ query, auth }) => {
        const rows = await listDeployments(db, projectScopeOf(auth), {
          appName: query.app_name,
          appVersion: query.app_version,
          query: query.query,
          limit: query.limit,
          offset: query.offset,
        });
        return page(rows, query, presentDeployment);
      },
    }),
    defineRoute({
      method: 'get',
      path: '/deployments/{id}',
      operationId: 'getDeployment',
      summary: 'Get a deployment',
      tags,
      auth: 'project',
      params: deploymentIdParams,
      responses: { 200: { description: 'The deployment', schema: deploymentSchema }, ...errorResponses(400, 404) },
      handler: async ({ params, auth }) => json(presentDeployment(await getDeployment(db, projectScopeOf(auth), params.id))),
    }),
    defineRoute({
      method: 'delete',
      path: '/deployments/{id}',
      operationId: 'deleteDeployment',
      summary: 'Stop a deployment: its build ends, its app versions are deleted and its running invocations fail',
      description: 'A failed or stopped deployment is left as it is. The deployment stays readable with status stopped.',
      tags,
      auth: 'project',
      params: deploymentIdParams,
      responses: { 204: { description: 'Stopped' }, ...errorResponses(400, 404) },
      handler: async ({ params, auth }) => {
        await deleteDeployment(deps, queue, projectScopeOf(auth), params.id);
        return noContent();
      },
    }),
    defineRoute({
      method: 'get',
      path: '/deployments/{id}/events',
      operationId: 'followDeployment',
      summary: 'Server-Sent Events: the deployment’s build log and state changes, replayed from since, until it is running, failed or stopped',
      description:
        'Every frame is a data line with a JSON object whose event field names it: log, deployment_state, app_version_summary, sse_heartbeat, error.',
      tags,
      auth: 'project',
      params: deploymentIdParams,
      query: followDeploymentQuery,
      responses: {
        200: { description: 'An event stream', schema: deploymentEventSchema, contentType: 'text/event-stream' },
        ...errorResponses(400, 404),
      },
      handler: async ({ params, query, auth, req, res }) => {
        const since = query.since === undefined ? undefined : resolveSince(query.since, deps.clock.now());
        await followDeployment(deps, follower, projectScopeOf(auth), params.id, since, { req, res });
        return { kind: 'handled' };
      },
    }),
  ];
}
