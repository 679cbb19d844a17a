import type { Readable } from 'node:stream';
import { z } from 'zod';
import type { AppDeps } from '../../app-deps.js';
import { inTransaction } from '../../db/pool.js';
import { AppError } from '../../http/errors.js';
import { defineRoute, json, noContent, type RouteDef } from '../../http/route.js';
import { errorResponses } from '../../http/standard-responses.js';
import { deleteBlobs, hasBlob, readBlob, writeBlob } from './blob-store.js';
import { recordBuildFailure, recordBuildSuccess } from './build-finish.js';
import { recordDeploymentEvents, stateFrame } from './deployment-events.js';
import { findDeploymentById, setDeploymentStatus, type DeploymentRow } from './deployments-store.js';
import { INTERNAL_APP_JOBS, internalTags as tags, jobGrant, logBatchSchema, sendStream, subjectEnded } from './internal-wire.js';
import { openGitToken, revokeAppJobTokens } from './job-tokens.js';
import type { AppsSettings } from './settings.js';
import { safeRelativePath } from './unpack.js';
import { writeJobLogs } from './internal-logs.js';

/**
 * The build pod's side of the internal wire (docs/apps.md, "Kubernetes mode"): its input,
 * the uploaded source, the built bundle, its log and its result. Public as far as API
 * keys go; every route takes the build Job's token, which names the one deployment.
 */

const buildResultSchema = z.discriminatedUnion('ok', [
  z
    .object({
      ok: z.literal(true),
      entry: z.string().min(1).max(1024),
      runtime: z.enum(['node', 'python']),
      checksum: z.string().max(128).nullable(),
      apps: z
        .array(z.object({ name: z.string().min(1).max(255), actions: z.array(z.object({ name: z.string().min(1).max(255) }).strict()).max(1000) }).strict())
        .min(1)
        .max(100),
    })
    .strict(),
  z.object({ ok: z.literal(false), error: z.string().min(1).max(64 * 1024), tail: z.array(z.string().max(64 * 1024)).max(100).default([]) }).strict(),
]);

const buildInputSchema = z.object({
  deployment_id: z.string(),
  entrypoint_rel_path: z.string(),
  source_type: z.enum(['upload', 'github']),
  source_url: z.string().nullable(),
  source_ref: z.string().nullable(),
  source_path: z.string().nullable(),
  source_checksum: z.string().nullable(),
  git_token: z.string().nullable(),
  env_vars: z.record(z.string(), z.string()),
  limits: z.object({ build_timeout_ms: z.number(), max_unpacked_bytes: z.number(), max_files: z.number() }),
});

/** The deployment the token names, while it still builds; 409 once it ended (deleted, failed). */
async function building(deps: AppDeps, id: string): Promise<DeploymentRow> {
  const row = await findDeploymentById(deps.db, id);
  if (row?.status !== 'queued' && row?.status !== 'in_progress') throw subjectEnded(`Deployment ${id}`);
  return row;
}

export function internalBuildRoutes(deps: AppDeps, settings: AppsSettings): RouteDef[] {
  const auth = 'public' as const;
  return [
    defineRoute({
      method: 'get',
      path: `${INTERNAL_APP_JOBS}/build`,
      operationId: 'internalGetBuildInput',
      summary: 'Internal, for a build Job: the deployment to build (moves it to in_progress)',
      tags,
      auth,
      responses: { 200: { description: 'The build input', schema: buildInputSchema }, ...errorResponses(401, 409) },
      handler: async ({ req }) => {
        const grant = await jobGrant(deps, req, 'build');
        const row = await inTransaction(deps.db, async (tx) => {
          const now = deps.clock.now();
          const started = await setDeploymentStatus(tx, grant.subjectId, { status: 'in_progress', from: ['queued'], now });
          if (started) await recordDeploymentEvents(deps, tx, started.id, [stateFrame(started, now)]);
          return started;
        });
        const current = row ?? (await building(deps, grant.subjectId));
        return json({
          deployment_id: current.id,
          entrypoint_rel_path: current.entrypoint_rel_path,
          source_type: current.source_type === 'file' ? 'upload' : 'github',
          source_url: current.source_url,
          source_ref: current.source_ref,
          source_path: current.source_path,
          source_checksum: current.source_checksum,
          git_token: openGitToken(grant, deps.sealer),
          env_vars: current.env_vars,
          limits: { build_timeout_ms: settings.buildTimeoutMs, max_unpacked_bytes: settings.maxUnpackedBytes, max_files: settings.maxFiles },
        });
      },
    }),
    defineRoute({
      method: 'get',
      path: `${INTERNAL_APP_JOBS}/build/source`,
      operationId: 'internalGetBuildSource',
      summary: 'Internal, for a build Job: the uploaded source (a zip or the single file)',
      tags,
      auth,
      responses: { 200: { description: 'The bytes as uploaded', schema: z.string().meta({ format: 'binary' }), contentType: 'application/octet-stream' }, ...errorResponses(401, 404, 409) },
      handler: async ({ req, res, log }) => {
        const grant = await jobGrant(deps, req, 'build');
        await building(deps, grant.subjectId);
        const blob = await readBlob(deps.db, grant.subjectId, 'source');
        if (!blob) throw new AppError(404, 'source_not_found', 'This deployment has no uploaded source (a git source is fetched by the build itself)');
        await sendStream(res, blob, log, 'application/octet-stream');
        return { kind: 'handled' };
      },
    }),
    defineRoute({
      method: 'put',
      path: `${INTERNAL_APP_JOBS}/build/bundle`,
      operationId: 'internalPutBuildBundle',
      summary: 'Internal, for a build Job: the built tree as a tar.gz, before the result',
      tags,
      auth,
      bodyType: 'raw',
      responses: { 204: { description: 'Stored' }, ...errorResponses(401, 409, 413) },
      handler: async ({ req, res }) => {
        const grant = await jobGrant(deps, req, 'build');
        await building(deps, grant.subjectId);
        try {
          await inTransaction(deps.db, (tx) => writeBlob(tx, grant.subjectId, 'bundle', req as Readable, settings.maxUnpackedBytes));
        } catch (error) {
          // The rest of the body is read and dropped first, so the client gets the 413
          // rather than a reset connection in the middle of its upload.
          if (error instanceof AppError && error.status === 413) {
            await drain(req as Readable);
            // And the connection is not kept: the client need not trust what is left on it.
            res.setHeader('Connection', 'close');
          }
          throw error;
        }
        return noContent();
      },
    }),
    defineRoute({
      method: 'post',
      path: `${INTERNAL_APP_JOBS}/build/result`,
      operationId: 'internalPostBuildResult',
      summary: 'Internal, for a build Job: how the build ended (ends its token)',
      tags,
      auth,
      body: buildResultSchema,
      responses: { 204: { description: 'Recorded' }, ...errorResponses(400, 401, 409, 413, 415) },
      handler: async ({ req, body: result }) => {
        const grant = await jobGrant(deps, req, 'build');
        const row = await building(deps, grant.subjectId);
        let failed: boolean;
        if (result.ok) {
          safeRelativePath(result.entry, 'entry');
          if (!(await hasBlob(deps.db, row.id, 'bundle'))) failed = await recordBuildFailure(deps, row.id, 'The build reported success without uploading its bundle', []);
          else failed = await recordBuildSuccess(deps, row, { entry: result.entry, runtime: result.runtime, checksum: result.checksum ?? undefined, apps: result.apps });
        } else {
          failed = await recordBuildFailure(deps, row.id, result.error, result.tail);
        }
        await revokeAppJobTokens(deps.db, 'build', row.id, deps.clock.now());
        // The source is built (or never will be); a failed build's bundle runs nowhere.
        await deleteBlobs(deps.db, row.id, failed ? ['source', 'bundle'] : ['source']);
        return noContent();
      },
    }),
    defineRoute({
      method: 'post',
      path: `${INTERNAL_APP_JOBS}/logs`,
      operationId: 'internalPostJobLogs',
      summary: 'Internal, for a build or run Job: a batch of log lines',
      tags,
      auth,
      body: logBatchSchema,
      responses: { 204: { description: 'Recorded' }, ...errorResponses(400, 401, 409, 413, 415) },
      handler: async ({ req, body }) => {
        await writeJobLogs(deps, req, body.lines);
        return noContent();
      },
    }),
  ];
}

/** Reads what is left of a request body and drops it (at most 30 s, then the connection is cut). */
async function drain(req: Readable): Promise<void> {
  if (req.readableEnded) return;
  const ended = new Promise<void>((resolve) => {
    req.once('end', resolve);
    req.once('close', resolve);
    req.once('error', () => resolve());
  });
  req.resume();
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([ended, new Promise<void>((resolve) => (timer = setTimeout(resolve, 30_000)))]);
  clearTimeout(timer);
  if (!req.readableEnded) req.destroy();
}
