import type { Request, Response } from 'express';
import type { AppDeps } from '../../app-deps.js';
import type { Queryable } from '../../db/pool.js';
import type { RowFollower } from '../../events/follow-row.js';
import { channelName } from '../../events/hub.js';
import { notFound } from '../../http/errors.js';
import type { ProjectScope } from '../../scope.js';
import { presentDeployment } from './deployments-schema.js';
import { appendDeploymentEvents, findDeployment, isTerminalDeployment, readDeploymentEvents, type DeploymentRow } from './deployments-store.js';

export const deploymentChannel = (id: string) => channelName('deployment', id);

/**
 * Appends frames to the deployment's event log and notifies its followers, in `db`'s
 * transaction when it is one (NOTIFY is delivered at commit, dropped on rollback).
 */
export async function recordDeploymentEvents(deps: Pick<AppDeps, 'events'>, db: Queryable, deploymentId: string, frames: { at: Date; event: object }[]) {
  if (frames.length === 0) return;
  await appendDeploymentEvents(db, deploymentId, frames);
  await deps.events.publish(deploymentChannel(deploymentId), { id: deploymentId }, db);
}

export const stateFrame = (row: DeploymentRow, at: Date) => ({ at, event: { event: 'deployment_state', deployment: presentDeployment(row), timestamp: at.toISOString() } });

/** Events sent per read: a long build log is sent in pages, each notification reading on. */
const PAGE = 500;

/**
 * GET /deployments/{id}/events: replays the deployment's event log (from `since`), then
 * follows it; closes once the deployment is terminal and every event before that has been
 * sent. Each notification (and each reconnect of the listener) reads the events after the
 * last one sent, so nothing is lost or sent twice whichever way they arrive.
 */
export async function followDeployment(
  deps: AppDeps,
  follower: RowFollower,
  scope: ProjectScope,
  id: string,
  since: Date | undefined,
  http: { req: Request; res: Response },
): Promise<void> {
  if (!(await findDeployment(deps.db, scope, id))) throw notFound('Deployment', id);
  let lastSeq = '0';
  await follower.follow(
    {
      channel: deploymentChannel(id),
      read: async () => {
        // The row first: a terminal row read before the events means every event of it is in them.
        const row = await findDeployment(deps.db, scope, id);
        return { row, events: await readDeploymentEvents(deps.db, id, lastSeq, since, PAGE) };
      },
      step: ({ row, events }, out, timestamp) => {
        for (const { seq, event } of events) {
          lastSeq = seq;
          out.send(event as { event: string });
        }
        if (!row) {
          out.send({ event: 'error', error: { code: 'not_found', message: 'The deployment no longer exists' }, timestamp: timestamp() });
          out.close();
          return;
        }
        if (events.length === PAGE) {
          setImmediate(() => void deps.events.publish(deploymentChannel(id), { id }).catch(() => undefined));
          return;
        }
        if (isTerminalDeployment(row.status)) out.close();
      },
      logFields: { deploymentId: id },
      failure: {
        log: 'deployment event stream failed to read the deployment',
        message: 'Reading the deployment failed',
        unsubscribeLog: 'unsubscribing a deployment stream failed',
      },
    },
    http,
  );
}
