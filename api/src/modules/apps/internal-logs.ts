import type { Request } from 'express';
import type { z } from 'zod';
import type { AppDeps } from '../../app-deps.js';
import { InvocationLogWriter } from '../invocations/log-events.js';
import { recordDeploymentEvents } from './deployment-events.js';
import { findDeploymentById } from './deployments-store.js';
import { anyJobGrant, subjectEnded, type logBatchSchema } from './internal-wire.js';

/**
 * POST /internal/app-jobs/logs: a build pod's lines go to its deployment's event log (as
 * the embedded build queue writes them), a run pod's to its invocation's events and its
 * deployment's (as an embedded run's). Stamped with the API's clock, not the pod's.
 */
export async function writeJobLogs(deps: AppDeps, req: Request, lines: z.output<typeof logBatchSchema>['lines']): Promise<void> {
  const grant = await anyJobGrant(deps, req);
  // npm's blank separator lines say nothing in a log view.
  const kept = lines.filter((line) => line.message.trim() !== '');
  if (kept.length === 0 && grant.kind === 'build') return;
  if (grant.kind === 'build') {
    const row = await findDeploymentById(deps.db, grant.subjectId);
    if (row?.status !== 'queued' && row?.status !== 'in_progress') throw subjectEnded(`Deployment ${grant.subjectId}`);
    const at = deps.clock.now();
    await recordDeploymentEvents(
      deps,
      deps.db,
      row.id,
      kept.map((line) => ({ at, event: { event: 'log', message: line.message, timestamp: at.toISOString() } })),
    );
    return;
  }
  const { rows } = await deps.db.query<{ status: string; deployment_id: string | null }>(
    `SELECT status, deployment_id FROM invocations WHERE org_id = $1 AND project_id = $2 AND id = $3`,
    [grant.scope.orgId, grant.scope.projectId, grant.subjectId],
  );
  if (rows[0]?.status !== 'running') throw subjectEnded(`Invocation ${grant.subjectId}`);
  const writer = new InvocationLogWriter(deps, grant.subjectId, rows[0].deployment_id);
  for (const line of kept) writer.add(line.stream, line.message);
  await writer.close();
}
