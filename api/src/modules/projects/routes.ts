import type { AppDeps } from '../../app-deps.js';
import { page, paginationResponseHeaders } from '../../http/pagination.js';
import { defineRoute, json, noContent, type Deprecation, type RouteDef } from '../../http/route.js';
import { errorResponses } from '../../http/standard-responses.js';
import { orgScopeOf } from '../../scope.js';
import {
  createProjectBody,
  listProjectsQuery,
  orgLimitsSchema,
  projectIdParams,
  projectLimitsSchema,
  projectSchema,
  updateLimitsBody,
  updateOrgLimitsBody,
  updateProjectBody,
} from './schema.js';
import {
  changeLimits,
  changeOrgLimits,
  changeProject,
  createProject,
  deleteProject,
  getProject,
  presentProject,
  readLimits,
  readOrgLimits,
} from './service.js';
import { listProjects } from './store.js';

const tags = ['Projects'];

/** The legacy /projects routes were announced deprecated 90 days before their removal. */
export const LEGACY_PROJECT_ROUTES_DEPRECATED_AT = new Date('2026-08-26T00:00:00Z');
export const LEGACY_PROJECT_ROUTES_SUNSET_AT = new Date('2026-11-24T00:00:00Z');

export function projectRoutes(deps: AppDeps): RouteDef[] {
  const { db } = deps;
  const current = [
    defineRoute({
      method: 'post',
      path: '/org/projects',
      operationId: 'createProject',
      summary: 'Create a project',
      tags,
      auth: 'org',
      body: createProjectBody,
      responses: { 200: { description: 'The project', schema: projectSchema }, ...errorResponses(400, 409) },
      handler: async ({ body, auth }) => json(presentProject(await createProject(deps, orgScopeOf(auth), body.name))),
    }),
    defineRoute({
      method: 'get',
      path: '/org/projects',
      operationId: 'listProjects',
      summary: 'List projects, newest first',
      tags,
      auth: 'org',
      query: listProjectsQuery,
      responses: {
        200: { description: 'A page of projects', schema: projectSchema.array(), headers: paginationResponseHeaders },
        ...errorResponses(400),
      },
      handler: async ({ query, auth }) => page(await listProjects(db, auth.orgId, query), query, presentProject),
    }),
    defineRoute({
      method: 'get',
      path: '/org/projects/{id}',
      operationId: 'getProject',
      summary: 'Get a project by id or name',
      tags,
      auth: 'org',
      params: projectIdParams,
      responses: { 200: { description: 'The project', schema: projectSchema }, ...errorResponses(404) },
      handler: async ({ params, auth }) => json(presentProject(await getProject(deps, orgScopeOf(auth), params.id))),
    }),
    defineRoute({
      method: 'patch',
      path: '/org/projects/{id}',
      operationId: 'updateProject',
      summary: 'Rename a project or change its status',
      tags,
      auth: 'org',
      params: projectIdParams,
      body: updateProjectBody,
      responses: { 200: { description: 'The project', schema: projectSchema }, ...errorResponses(400, 404, 409) },
      handler: async ({ params, body, auth }) => json(presentProject(await changeProject(deps, orgScopeOf(auth), params.id, body))),
    }),
    defineRoute({
      method: 'delete',
      path: '/org/projects/{id}',
      operationId: 'deleteProject',
      summary: 'Soft-delete an empty project',
      tags,
      auth: 'org',
      params: projectIdParams,
      responses: { 204: { description: 'Deleted' }, ...errorResponses(404, 409) },
      handler: async ({ params, auth }) => {
        await deleteProject(deps, orgScopeOf(auth), params.id);
        return noContent();
      },
    }),
    defineRoute({
      method: 'get',
      path: '/org/projects/{id}/limits',
      operationId: 'getProjectLimits',
      summary: 'Get a project’s limits (null: no project cap)',
      tags,
      auth: 'org',
      params: projectIdParams,
      responses: { 200: { description: 'The limits', schema: projectLimitsSchema }, ...errorResponses(404) },
      handler: async ({ params, auth }) => json(await readLimits(deps, orgScopeOf(auth), params.id)),
    }),
    defineRoute({
      method: 'patch',
      path: '/org/projects/{id}/limits',
      operationId: 'updateProjectLimits',
      summary: 'Change the limits given; 0 removes a cap, absent fields stay',
      tags,
      auth: 'org',
      params: projectIdParams,
      body: updateLimitsBody,
      responses: { 200: { description: 'The limits', schema: projectLimitsSchema }, ...errorResponses(400, 404) },
      handler: async ({ params, body, auth }) => json(await changeLimits(deps, orgScopeOf(auth), params.id, body)),
    }),
    defineRoute({
      method: 'get',
      path: '/org/limits',
      operationId: 'getOrgLimits',
      summary: 'Get the organisation’s limits',
      tags: ['Organisation'],
      auth: 'org',
      responses: { 200: { description: 'The limits', schema: orgLimitsSchema } },
      handler: async ({ auth }) => json(await readOrgLimits(deps, orgScopeOf(auth))),
    }),
    defineRoute({
      method: 'patch',
      path: '/org/limits',
      operationId: 'updateOrgLimits',
      summary: 'Set the default per-project session cap',
      tags: ['Organisation'],
      auth: 'org',
      body: updateOrgLimitsBody,
      responses: { 200: { description: 'The limits', schema: orgLimitsSchema }, ...errorResponses(400) },
      handler: async ({ body, auth }) =>
        json(await changeOrgLimits(deps, orgScopeOf(auth), body.default_project_max_concurrent_sessions)),
    }),
  ];
  return [...current, ...legacyTwins(current)];
}

/**
 * The legacy /projects/{id} routes: the same handlers and schemas as their /org twins,
 * marked deprecated until the sunset instant and gone after it.
 */
function legacyTwins(current: RouteDef[]): RouteDef[] {
  const legacy: Array<[RouteDef['method'], string]> = [
    ['get', '/org/projects/{id}'],
    ['patch', '/org/projects/{id}'],
    ['delete', '/org/projects/{id}'],
    ['patch', '/org/projects/{id}/limits'],
  ];
  return legacy.map(([method, path]) => {
    const twin = current.find((r) => r.method === method && r.path === path);
    if (!twin) throw new Error(`no route ${method} ${path}`);
    const deprecation: Deprecation = {
      deprecatedAt: LEGACY_PROJECT_ROUTES_DEPRECATED_AT,
      sunsetAt: LEGACY_PROJECT_ROUTES_SUNSET_AT,
      successor: { method, path },
    };
    return {
      ...twin,
      path: path.replace(/^\/org/, ''),
      operationId: `${twin.operationId}Legacy`,
      summary: `${twin.summary} (deprecated: use ${method.toUpperCase()} ${path})`,
      deprecation,
      responses: { ...twin.responses, ...errorResponses(410) },
    };
  });
}
