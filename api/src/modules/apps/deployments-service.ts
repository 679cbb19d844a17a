import { rename, rm, stat } from 'node:fs/promises';
import type { Request } from 'express';
import type { AppDeps } from '../../app-deps.js';
import { inTransaction, type Queryable } from '../../db/pool.js';
import { AppError, badRequest, notFound } from '../../http/errors.js';
import { validateRequest } from '../../http/validate.js';
import { newId } from '../../ids.js';
import type { ProjectScope } from '../../scope.js';
import { shareLockLiveProject } from '../projects/store.js';
import { stopInvocationsOfDeployment } from '../invocations/runs.js';
import { deleteAppVersions } from './apps-store.js';
import { DELETED_REASON, removeBuildDir } from './build-queue.js';
import { deleteBlobs, writeBlob } from './blob-store.js';
import { createReadStream } from 'node:fs';
import { readDeploymentForm, sourceOfForm } from './deployment-form.js';
import { checkGitUrl, SourceError } from './git-source.js';
import { recordDeploymentEvents, stateFrame } from './deployment-events.js';
import { deploymentFormSchema, deploymentJsonSchema, type DeploymentForm } from './deployments-schema.js';
import { findDeployment, insertDeployment, setDeploymentStatus, type DeploymentRow } from './deployments-store.js';
import { ensureAppsDirs } from './sandbox.js';
import { sourcePath, spoolDir, type AppsSettings } from './settings.js';
import { isZipFile, planZip, safeRelativePath } from './unpack.js';

const ENTRY_FILE = /\.(js|mjs|cjs|ts|mts|cts|py)$/;

/** Where builds go: the embedded build queue, or Kubernetes mode's build Jobs (kube-jobs.ts). */
export interface Builds {
  /** A deployment was created (its git token, if any, for its fetch). */
  enqueued(id: string, gitToken?: string): void;
  /** It was deleted: its build stops. */
  abort(id: string): void;
}

export function appsSettings(deps: AppDeps): AppsSettings {
  const settings = deps.settings.apps;
  if (!settings) throw new AppError(503, 'apps_unavailable', 'This service runs no apps: in Kubernetes mode set a runner image (BROWSERPLANE_APP_RUNNER_IMAGE, the chart\'s apps.runner.image)');
  return settings;
}

/**
 * POST /deployments: reads the form, checks it (and the zip, before anything is stored:
 * bad paths, links, limits and a missing entrypoint are refused at once), moves the
 * upload into the content-addressed store and queues the build.
 */
export async function createDeployment(deps: AppDeps, queue: Builds | undefined, scope: ProjectScope, request: Request): Promise<DeploymentRow> {
  const settings = appsSettings(deps);
  await ensureAppsDirs(settings.dataDir);
  const asJson = Boolean(request.is(['application/json', 'application/*+json']));
  const form = asJson ? undefined : await readDeploymentForm(request, spoolDir(settings.dataDir), settings.maxUploadBytes);
  const spooled = form?.file;
  try {
    const { body } = validateRequest({
      body: form
        ? { schema: deploymentFormSchema, value: { ...Object.fromEntries(form.fields), source: sourceOfForm(form), env_vars: form.envVars, ...(spooled ? { file: true } : {}) } }
        : { schema: deploymentJsonSchema, value: request.body as unknown },
    });
    const input = body as Omit<DeploymentForm, 'entrypoint_rel_path'> & { entrypoint_rel_path?: string | undefined };
    const entrypoint = input.source?.entrypoint ?? input.entrypoint_rel_path!;
    safeRelativePath(entrypoint, input.source ? 'source.entrypoint' : 'entrypoint_rel_path');
    if (input.source?.path !== undefined) safeRelativePath(input.source.path, 'source.path');
    if (input.source) checkSource(input.source.url, settings);
    if (!ENTRY_FILE.test(entrypoint)) throw badRequest('invalid_entrypoint', `The entrypoint ${JSON.stringify(entrypoint)} must be a .js, .mjs, .cjs, .ts or .py file`);
    if (spooled) {
      if (spooled.size === 0) throw badRequest('invalid_request', 'The file is empty', [{ code: 'empty', message: 'the file part holds no bytes', field: 'body.file' }]);
      if (await isZipFile(spooled.path)) {
        const plan = await planZip(spooled.path, settings);
        const wanted = safeRelativePath(entrypoint, 'entrypoint_rel_path').join('/');
        if (!plan.files.has(wanted)) {
          throw badRequest('invalid_entrypoint', `The zip holds no file ${JSON.stringify(entrypoint)}`, [{ code: 'not_found', message: 'not in the zip', field: 'body.entrypoint_rel_path' }]);
        }
      }
      if (!settings.kubernetes) {
        // Content-addressed: the same bytes are stored once.
        const stored = sourcePath(settings.dataDir, spooled.sha256);
        if (await stat(stored).then(() => true, () => false)) await rm(spooled.path, { force: true });
        else await rename(spooled.path, stored);
      }
    }
    const row = await inTransaction(deps.db, async (tx) => {
      const project = await shareLockLiveProject(tx, scope.orgId, scope.projectId);
      if (!project || project.id !== scope.projectId) throw new AppError(404, 'project_not_found', 'The project no longer exists');
      const now = deps.clock.now();
      const created = await insertDeployment(tx, scope, {
        id: newId('dep'),
        entrypointRelPath: entrypoint,
        envVars: input.env_vars,
        version: input.version,
        force: input.force,
        source: input.source
          ? { type: 'github', url: input.source.url, ref: input.source.ref, path: input.source.path ?? null }
          : { type: 'file', checksum: spooled!.sha256 },
        now,
      });
      // Kubernetes mode: in Postgres, where every replica serves it to the build Job.
      if (spooled && settings.kubernetes) await writeBlob(tx, created.id, 'source', createReadStream(spooled.path), settings.maxUploadBytes);
      await recordDeploymentEvents(deps, tx, created.id, [stateFrame(created, now)]);
      return created;
    });
    queue?.enqueued(row.id, input.source?.auth?.token);
    return row;
  } finally {
    if (spooled) await rm(spooled.path, { force: true });
  }
}

function checkSource(url: string, settings: AppsSettings): void {
  try {
    checkGitUrl(url, settings.gitAllowLocal);
  } catch (error) {
    if (!(error instanceof SourceError)) throw error;
    throw badRequest('invalid_source', error.message, [{ code: 'invalid_source', message: error.message, field: 'body.source.url' }]);
  }
}

export async function getDeployment(db: Queryable, scope: ProjectScope, id: string): Promise<DeploymentRow> {
  const row = await findDeployment(db, scope, id);
  if (!row) throw notFound('Deployment', id);
  return row;
}

/**
 * DELETE /deployments/{id}: stops it (a queued or building one never runs; a running one's
 * apps stop being invocable) and deletes its app versions. A failed or stopped one stays
 * as it is. The deployment itself stays readable, status stopped. Then its build is
 * aborted and its queued and running invocations end (stopInvocationsOfDeployment).
 */
export async function deleteDeployment(deps: AppDeps, queue: Builds | undefined, scope: ProjectScope, id: string): Promise<void> {
  const stopped = await inTransaction(deps.db, async (tx) => {
    const row = await findDeployment(tx, scope, id, { forUpdate: true });
    if (!row) throw notFound('Deployment', id);
    if (row.status === 'failed' || row.status === 'stopped') return undefined;
    const now = deps.clock.now();
    const done = await setDeploymentStatus(tx, id, { status: 'stopped', from: ['queued', 'in_progress', 'running'], statusReason: DELETED_REASON, now });
    await deleteAppVersions(tx, { deploymentId: id }, now);
    await recordDeploymentEvents(deps, tx, id, [stateFrame(done!, now)]);
    return row.status;
  });
  if (!stopped) return;
  queue?.abort(id);
  // The runner's side (invocations/runs.ts): fails them, kills their runs, revokes their keys.
  await stopInvocationsOfDeployment(deps, scope, id, DEPLOYMENT_DELETED_INVOCATION_REASON);
  // Its runs are over (stopInvocationsOfDeployment waits for them) and no version of it is
  // live; a build the delete aborted removes its own dir as it ends.
  if (deps.settings.apps?.kubernetes) await deleteBlobs(deps.db, id);
  else if (stopped === 'running' && deps.settings.apps) await removeBuildDir(deps.settings.apps.dataDir, id, deps.log);
}

/** The status_reason of the invocations a deployment's delete ends. */
export const DEPLOYMENT_DELETED_INVOCATION_REASON = 'Its deployment was deleted';
