import { z } from 'zod';
import type { AppDeps } from '../../app-deps.js';
import { inTransaction } from '../../db/pool.js';
import { AppError } from '../../http/errors.js';
import { defineRoute, json, noContent, type RouteDef } from '../../http/route.js';
import { errorResponses } from '../../http/standard-responses.js';
import { readBlob } from '../apps/blob-store.js';
import { INTERNAL_APP_JOBS, internalTags as tags, jobGrant, runResultSchema, sendStream, subjectEnded } from '../apps/internal-wire.js';
import { DEFAULT_RUN_TIMEOUT_SECONDS, finishRun, mintRunKey, withTimeoutSetting } from './run-finish.js';
import { invocationChannel } from './service.js';
import { findInvocation, setInvocationStatus } from './store.js';

/**
 * The run pod's side of the internal wire (docs/apps.md, "Kubernetes mode"): its input
 * (taken once: it moves the invocation to running and mints the run's own API key), the
 * deployment's bundle, and its result. Every route takes the run Job's token, which names
 * the one invocation.
 */

const runInputSchema = z.object({
  invocation_id: z.string(),
  deployment_id: z.string(),
  app_name: z.string(),
  action_name: z.string(),
  entry: z.string(),
  runtime: z.enum(['node', 'python']),
  payload: z.string().nullable(),
  timeout_ms: z.number(),
  env: z.record(z.string(), z.string()),
});

interface BuiltVersion {
  runtime: 'node' | 'python';
  entry: string;
  env_vars: Record<string, string>;
  entrypoint_rel_path: string;
}

export function internalRunRoutes(deps: AppDeps): RouteDef[] {
  const auth = 'public' as const;
  return [
    defineRoute({
      method: 'get',
      path: `${INTERNAL_APP_JOBS}/run`,
      operationId: 'internalGetRunInput',
      summary: 'Internal, for a run Job: the action to run, its payload and env (once: moves the invocation to running)',
      tags,
      auth,
      responses: { 200: { description: 'The run input', schema: runInputSchema }, ...errorResponses(401, 409, 503) },
      handler: async ({ req }) => {
        const grant = await jobGrant(deps, req, 'run');
        const baseUrl = deps.settings.internalUrl;
        if (!baseUrl) throw new AppError(503, 'apps_unavailable', 'The service does not know its internal URL yet');
        const scope = grant.scope;
        const input = await inTransaction(deps.db, async (tx) => {
          const row = await findInvocation(tx, scope, grant.subjectId, { forUpdate: true });
          // Taken once: a second pod (or a second fetch) of the same run gets nothing.
          if (row?.status !== 'queued' || row.deployment_id === null) throw subjectEnded(`Invocation ${grant.subjectId}`);
          const { rows } = await tx.query<BuiltVersion>(
            `SELECT v.runtime, v.entry, v.env_vars, d.entrypoint_rel_path
               FROM app_versions v JOIN deployments d ON d.id = v.deployment_id
              WHERE v.deployment_id = $1 AND v.app_name = $2 ORDER BY v.seq DESC LIMIT 1`,
            [row.deployment_id, row.app_name],
          );
          const version = rows[0];
          if (!version) throw subjectEnded(`The app ${row.app_name} of deployment ${row.deployment_id}`);
          const timeoutMs = (row.async_timeout_seconds ?? DEFAULT_RUN_TIMEOUT_SECONDS) * 1000;
          const now = deps.clock.now();
          const { key } = await mintRunKey(tx, scope, row.id, timeoutMs, now);
          const running = await setInvocationStatus(tx, scope, row.id, { status: 'running', now });
          await deps.events.publish(invocationChannel(row.id), { id: row.id, status: running.status }, tx);
          return {
            invocation_id: row.id,
            deployment_id: row.deployment_id,
            app_name: row.app_name,
            action_name: row.action_name,
            entry: version.entry,
            runtime: version.runtime,
            payload: row.payload,
            timeout_ms: timeoutMs,
            // The deployment's variables first: the platform's own are not the app's to replace.
            env: { ...version.env_vars, KERNEL_BASE_URL: baseUrl, KERNEL_API_KEY: key, ENTRYPOINT_RELPATH: version.entrypoint_rel_path },
          };
        });
        return json(input);
      },
    }),
    defineRoute({
      method: 'get',
      path: `${INTERNAL_APP_JOBS}/run/bundle`,
      operationId: 'internalGetRunBundle',
      summary: 'Internal, for a run Job: the built bundle of the invocation’s deployment (tar.gz)',
      tags,
      auth,
      responses: { 200: { description: 'The bundle', schema: z.string().meta({ format: 'binary' }), contentType: 'application/gzip' }, ...errorResponses(401, 404, 409) },
      handler: async ({ req, res, log }) => {
        const grant = await jobGrant(deps, req, 'run');
        const row = await findInvocation(deps.db, grant.scope, grant.subjectId);
        if (row?.status !== 'running' || row.deployment_id === null) throw subjectEnded(`Invocation ${grant.subjectId}`);
        const blob = await readBlob(deps.db, row.deployment_id, 'bundle');
        if (!blob) throw new AppError(404, 'bundle_not_found', `Deployment ${row.deployment_id} has no built bundle (deleted meanwhile?)`);
        await sendStream(res, blob, log, 'application/gzip');
        return { kind: 'handled' };
      },
    }),
    defineRoute({
      method: 'post',
      path: `${INTERNAL_APP_JOBS}/run/result`,
      operationId: 'internalPostRunResult',
      summary: 'Internal, for a run Job: the action’s result (ends the run, its key and its token)',
      tags,
      auth,
      body: runResultSchema,
      responses: { 204: { description: 'Recorded' }, ...errorResponses(400, 401, 409, 413, 415) },
      handler: async ({ req, body: result }) => {
        const grant = await jobGrant(deps, req, 'run');
        const row = await findInvocation(deps.db, grant.scope, grant.subjectId);
        if (!row) throw subjectEnded(`Invocation ${grant.subjectId}`);
        const timeoutMs = (row.async_timeout_seconds ?? DEFAULT_RUN_TIMEOUT_SECONDS) * 1000;
        if (!(await finishRun(deps, grant.scope, row.id, withTimeoutSetting(result, timeoutMs)))) throw subjectEnded(`Invocation ${row.id}`);
        return noContent();
      },
    }),
  ];
}
