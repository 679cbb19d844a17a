import type { AppDeps, ProjectResourceCounter } from '../../app-deps.js';
import { createRowFollower } from '../../events/follow-row.js';
import type { ApiModule } from '../api-module.js';
import { appRoutes } from './apps-routes.js';
import { BuildQueue } from './build-queue.js';
import { deploymentRoutes } from './deployments-routes.js';
import { inspectApps } from './inspect.js';
import { internalBuildRoutes } from './internal-build-routes.js';
import { kubeAppJobs } from './kube-jobs.js';

/**
 * Deployments, their builds and the apps they register (issue 21). Where the service is
 * configured for apps (AppSettings.apps), mounting the routes starts the build queue,
 * which stops itself on shutdown.
 */
export const appsModule: ApiModule = {
  name: 'apps',
  routes: (deps) => {
    const settings = deps.settings.apps;
    // Kubernetes mode: builds are Jobs (kube-jobs.ts), and their pods speak the internal wire.
    const jobs = kubeAppJobs(deps);
    if (settings && jobs) return [...deploymentRoutes(deps, jobs, createRowFollower(deps)), ...appRoutes(deps), ...internalBuildRoutes(deps, settings)];
    const queue = settings ? new BuildQueue(deps, settings, inspectApps) : undefined;
    queue?.start();
    if (queue) queues.set(deps, queue);
    return [...deploymentRoutes(deps, queue, createRowFollower(deps)), ...appRoutes(deps)];
  },
  projectResources: [countProjectDeployments],
};

const queues = new WeakMap<AppDeps, BuildQueue>();

/**
 * For the service's shutdown, while the database is up: aborts the running build (its
 * deployment fails, "The service is shutting down") and waits for the queue to stop.
 */
export async function stopBuilds(deps: AppDeps): Promise<void> {
  await queues.get(deps)?.stop();
}

/** Deployments that are queued, building or running keep their project from being deleted. */
async function countProjectDeployments(...[db, projectId]: Parameters<ProjectResourceCounter>) {
  const { rows } = await db.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM deployments WHERE project_id = $1 AND deleted_at IS NULL AND status IN ('queued', 'in_progress', 'running')`,
    [projectId],
  );
  return { kind: 'deployments', count: rows[0]?.n ?? 0 };
}
