import type { AppDeps } from '../../app-deps.js';
import type { RouteDef } from '../../http/route.js';
import { projectScopeOf } from '../../scope.js';
import { invocationBrowsers } from '../browsers/invocation-browsers.js';
import type { ApiModule } from '../api-module.js';
import type { InvocationBrowsers } from './browsers.js';
import { internalRunRoutes } from './internal-run-routes.js';
import { cancelKubeRuns } from './kube-runs.js';
import { releaseRun } from './run-finish.js';
import { invocationRoutes } from './routes.js';
import { countProjectInvocations } from './service.js';

export const invocationsModule: ApiModule = {
  name: 'invocations',
  routes: (deps) => {
    const browsers = invocationBrowsers(deps);
    const routes = invocationRoutes(deps, { browsers }).map((route) => deleteBrowsersOnFinish(deps, route, browsers));
    // Kubernetes mode: run Jobs fetch their input and report here.
    return deps.settings.apps?.kubernetes ? [...routes, ...internalRunRoutes(deps)] : routes;
  },
  projectResources: [countProjectInvocations],
};

/**
 * Finishing an invocation (PATCH to succeeded or failed) deletes its browsers once the
 * change has committed. A failure here does not undo the finish: it is logged, and the
 * browsers module's reaper deletes browsers of finished invocations on its next pass.
 */
function deleteBrowsersOnFinish(deps: AppDeps, route: RouteDef, browsers: InvocationBrowsers): RouteDef {
  if (route.operationId !== 'updateInvocation') return route;
  return {
    ...route,
    handler: async (ctx) => {
      const result = await route.handler(ctx);
      const status = (ctx.body as { status?: string } | undefined)?.status;
      if (status === 'succeeded' || status === 'failed') {
        const id = (ctx.params as { id: string }).id;
        await browsers
          .deleteAll(projectScopeOf(ctx.auth), id)
          .catch((error: unknown) => deps.log.error({ err: error, invocationId: id }, 'deleting the browsers of a finished invocation failed'));
        // A run Job of it (Kubernetes mode) is deleted; its key and token are revoked.
        if (deps.settings.apps?.kubernetes) {
          await cancelKubeRuns(deps, [id]);
          await releaseRun(deps, projectScopeOf(ctx.auth), id);
        }
      }
      return result;
    },
  };
}
