import type { Request, Response } from 'express';
import type { AppDeps } from '../../app-deps.js';
import type { RowFollower } from '../../events/follow-row.js';
import { getInvocation, invocationChannel, isTerminal, presentInvocation } from './service.js';
import { invocationLogsAfter } from './log-events.js';
import { findInvocation, type Scope } from './store.js';

export interface FollowOptions {
  /** Overrides AppSettings.sseHeartbeatMs. */
  heartbeatMs?: number | undefined;
  /** Log lines from this instant on (default: all of them). */
  since?: Date | undefined;
}

/**
 * GET /invocations/{id}/events: the current state first, then every change, until the
 * invocation is terminal; then the server closes the stream. Notifications only say
 * "this invocation changed" (level-triggered): each one, and each reconnect of the
 * listener (which may have missed some), re-reads the row and sends it if it differs
 * from the last frame sent. An app run's log lines (invocation_events) come before the
 * state: those at or after `since` first, then each new batch as its notification arrives,
 * so the last frame of a finished run is its final state.
 */
export async function followInvocation(
  deps: AppDeps,
  follower: RowFollower,
  scope: Scope,
  id: string,
  http: { req: Request; res: Response },
  options: FollowOptions = {},
): Promise<void> {
  // Before any header goes out, so an unknown id is an ordinary 404.
  await getInvocation(deps.db, scope, id);
  let lastSent: string | undefined;
  let lastLogSeq = 0;
  await follower.follow(
    {
      channel: invocationChannel(id),
      read: () => findInvocation(deps.db, scope, id),
      sharedReadKey: `invocation:${scope.orgId}/${scope.projectId}/${id}`,
      step: async (row, out, timestamp) => {
        for (const log of await invocationLogsAfter(deps.db, id, lastLogSeq, options.since)) {
          lastLogSeq = log.seq;
          out.send({ ...log.event });
        }
        if (!row) {
          out.send({ event: 'error', error: { code: 'not_found', message: 'The invocation no longer exists' }, timestamp: timestamp() });
          out.close();
          return;
        }
        const invocation = presentInvocation(row);
        const key = JSON.stringify(invocation);
        if (key !== lastSent) {
          lastSent = key;
          out.send({ event: 'invocation_state', invocation, timestamp: timestamp() });
        }
        if (isTerminal(row.status)) out.close();
      },
      logFields: { invocationId: id },
      failure: {
        log: 'invocation event stream failed to read the invocation',
        message: 'Reading the invocation failed',
        unsubscribeLog: 'unsubscribing an invocation stream failed',
      },
      heartbeatMs: options.heartbeatMs,
    },
    http,
  );
}
