import type { Queryable } from '../../db/pool.js';
import type { Scope } from './store.js';

/** The live build of an app at a version (app_versions, written by a deployment's build). */
export interface LiveAppVersion {
  id: string;
  deployment_id: string;
  app_name: string;
  version: string;
  runtime: 'node' | 'python';
  entry: string;
  actions: { name: string }[];
  env_vars: Record<string, string>;
  /** The deployment's entrypoint_rel_path, as the app's ENTRYPOINT_RELPATH. */
  entrypoint_rel_path: string;
}

export async function findLiveAppVersion(db: Queryable, scope: Scope, appName: string, version: string): Promise<LiveAppVersion | undefined> {
  const { rows } = await db.query<LiveAppVersion>(
    `SELECT id, deployment_id, app_name, version, runtime, entry, actions, env_vars,
            (SELECT d.entrypoint_rel_path FROM deployments d WHERE d.id = app_versions.deployment_id) AS entrypoint_rel_path
       FROM app_versions
      WHERE org_id = $1 AND project_id = $2 AND app_name = $3 AND version = $4 AND deleted_at IS NULL`,
    [scope.orgId, scope.projectId, appName, version],
  );
  return rows[0];
}
