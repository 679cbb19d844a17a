import type { AppDeps } from '../../app-deps.js';
import { page, paginationResponseHeaders } from '../../http/pagination.js';
import { defineRoute, type RouteDef } from '../../http/route.js';
import { errorResponses } from '../../http/standard-responses.js';
import { projectScopeOf } from '../../scope.js';
import { listAppVersions, type AppVersionRow } from './apps-store.js';
import { APP_REGION, appSchema, listAppsQuery, redactEnvVars } from './deployments-schema.js';

export function presentApp(row: AppVersionRow) {
  return {
    id: row.id,
    app_name: row.app_name,
    version: row.version,
    actions: row.actions,
    deployment: row.deployment_id,
    env_vars: redactEnvVars(row.env_vars),
    region: APP_REGION,
  };
}

export function appRoutes(deps: AppDeps): RouteDef[] {
  return [
    defineRoute({
      method: 'get',
      path: '/apps',
      operationId: 'listApps',
      summary: 'List the live app versions (one per app and version), newest first',
      tags: ['Apps'],
      auth: 'project',
      query: listAppsQuery,
      responses: {
        200: { description: 'A page of app versions', schema: appSchema.array(), headers: paginationResponseHeaders },
        ...errorResponses(400),
      },
      handler: async ({ query, auth }) => {
        const rows = await listAppVersions(deps.db, projectScopeOf(auth), {
          appName: query.app_name,
          version: query.version,
          query: query.query,
          limit: query.limit,
          offset: query.offset,
        });
        return page(rows, query, presentApp);
      },
    }),
  ];
}
