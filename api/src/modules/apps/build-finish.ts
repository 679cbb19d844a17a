import type { AppDeps } from '../../app-deps.js';
import { inTransaction } from '../../db/pool.js';
import { newId } from '../../ids.js';
import { deleteAppVersions, findLiveAppVersion, insertAppVersion } from './apps-store.js';
import type { BuildOutput } from './build.js';
import { APP_REGION, redactEnvVars } from './deployments-schema.js';
import { recordDeploymentEvents, stateFrame } from './deployment-events.js';
import { findDeploymentById, setDeploymentStatus, type DeploymentRow } from './deployments-store.js';

/**
 * How a build's end is recorded, wherever it ran (the embedded build queue, a build Job's
 * report): the apps registered and the deployment running, or the deployment failed with
 * its reason and the log's tail. Both change a deployment only from in_progress (queued
 * too for a failure), so a delete that won the race, or a second report, changes nothing.
 */

/** Log lines a failed build's status_reason ends with. */
export const REASON_TAIL_LINES = 25;
const REASON_MAX_CHARS = 4000;

/**
 * Records the apps and marks the deployment running, or fails it when an (app, version) is
 * taken and force is off. True when the deployment ended failed here.
 */
export async function recordBuildSuccess(deps: AppDeps, row: DeploymentRow, output: BuildOutput): Promise<boolean> {
  const conflict = await inTransaction(deps.db, async (tx) => {
    const now = deps.clock.now();
    const current = await findDeploymentById(tx, row.id);
    // Deleted while it built: the delete recorded its own state.
    if (current?.status !== 'in_progress') return undefined;
    const scope = { orgId: row.org_id, projectId: row.project_id };
    const frames: { at: Date; event: object }[] = [];
    for (const app of output.apps) {
      const live = await findLiveAppVersion(tx, row.project_id, app.name, row.version);
      if (live && !row.force) {
        return `app ${JSON.stringify(app.name)} version ${JSON.stringify(row.version)} already exists (deployment ${live.deployment_id}); deploy with force to replace it, or use another version`;
      }
      if (live) await deleteAppVersions(tx, { id: live.id }, now);
      const version = await insertAppVersion(tx, scope, {
        id: newId('app'),
        deployment_id: row.id,
        app_name: app.name,
        version: row.version,
        runtime: output.runtime,
        entry: output.entry,
        actions: app.actions.map((action) => ({ name: action.name })),
        env_vars: row.env_vars,
        created_at: now,
      });
      const summary = { event: 'app_version_summary', id: version.id, app_name: app.name, version: row.version, actions: version.actions, env_vars: redactEnvVars(row.env_vars), region: APP_REGION };
      frames.push({ at: now, event: { ...summary, timestamp: now.toISOString() } });
    }
    const done = await setDeploymentStatus(tx, row.id, { status: 'running', from: ['in_progress'], statusReason: null, ...(output.checksum ? { checksum: output.checksum } : {}), now });
    frames.push(stateFrame(done!, now));
    await recordDeploymentEvents(deps, tx, row.id, frames);
    return undefined;
  });
  if (conflict === undefined) return false;
  return recordBuildFailure(deps, row.id, conflict, []);
}

/** Fails a queued or building deployment with `reason` and the log's tail; true when it did. */
export async function recordBuildFailure(deps: AppDeps, id: string, reason: string, tail: readonly string[]): Promise<boolean> {
  const kept = tail.slice(-REASON_TAIL_LINES);
  const withTail = kept.length ? `${reason}\n--- last build output\n${kept.join('\n')}` : reason;
  const statusReason = withTail.length > REASON_MAX_CHARS ? `${withTail.slice(0, 200)}\n[...]\n${withTail.slice(-(REASON_MAX_CHARS - 210))}` : withTail;
  return inTransaction(deps.db, async (tx) => {
    const now = deps.clock.now();
    const row = await setDeploymentStatus(tx, id, { status: 'failed', from: ['queued', 'in_progress'], statusReason, now });
    if (row) await recordDeploymentEvents(deps, tx, id, [stateFrame(row, now)]);
    return row !== undefined;
  }).catch((error: unknown) => {
    deps.log.error({ err: error, deploymentId: id }, 'marking a deployment failed did not work');
    return false;
  });
}
