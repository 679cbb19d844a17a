import type { Request, Response } from 'express';
import type { AppDeps } from '../../app-deps.js';
import { createRowFollower, type RowFollower } from '../../events/follow-row.js';
import { connectionChannel } from './service.js';
import type { FlowRow } from './store.js';
import { isTerminalFlow, presentStateEvent, type ViewContext } from './view.js';

/** The flow a stream follows, read fresh at every notification; 'gone' once deleted. */
export type FlowSource = () => Promise<FlowRow | null | 'gone'>;

export interface FollowFlowOptions {
  /** Overrides AppSettings.sseHeartbeatMs. */
  heartbeatMs?: number | undefined;
  /**
   * Shares re-reads with the other streams of this follower that give the same key (one
   * follower per app; the key names the source's read, tenant included). Without both,
   * each stream reads on its own.
   */
  follower?: RowFollower | undefined;
  sharedReadKey?: string | undefined;
}

const stateKey = (flow: FlowRow) =>
  JSON.stringify([flow.id, flow.status, flow.step, flow.view, flow.error_code, flow.error_message, flow.website_error, flow.browser_session_id]);

/**
 * GET /auth/connections/{id}/events (and the hosted page's stream): the flow's state
 * first, then every change, until SUCCESS, FAILED, EXPIRED or CANCELED; then the server
 * closes the stream (CONTRACT §12.5). Notifications are level-triggered: each one, and
 * each reconnect of the listener, re-reads the flow and sends it if it changed. With no
 * flow yet, the stream waits (heartbeats only) for the next login to start. Deleting the
 * connection ends a running flow's stream with CANCELED.
 */
export async function followFlow(
  deps: AppDeps,
  connectionId: string,
  source: FlowSource,
  ctx: ViewContext,
  http: { req: Request; res: Response },
  options: FollowFlowOptions = {},
): Promise<void> {
  let lastKey: string | undefined;
  let lastFlow: FlowRow | undefined;
  const follower = options.follower ?? createRowFollower(deps);
  await follower.follow(
    {
      channel: connectionChannel(connectionId),
      read: source,
      sharedReadKey: options.follower ? options.sharedReadKey : undefined,
      step: async (flow, out, timestamp) => {
        if (flow === 'gone') {
          if (lastFlow && !isTerminalFlow(lastFlow)) {
            const canceled: FlowRow = { ...lastFlow, status: 'CANCELED', step: 'COMPLETED', error_code: 'flow_canceled', error_message: 'The auth connection was deleted' };
            out.send(await presentStateEvent(ctx, canceled, timestamp()));
          } else if (!lastFlow) {
            out.send({ event: 'error', error: { code: 'not_found', message: 'The auth connection no longer exists' }, timestamp: timestamp() });
          }
          out.close();
          return;
        }
        if (!flow) return;
        const key = stateKey(flow);
        if (key !== lastKey) {
          lastKey = key;
          lastFlow = flow;
          out.send(await presentStateEvent(ctx, flow, timestamp()));
        }
        if (isTerminalFlow(flow)) out.close();
      },
      logFields: { connectionId },
      failure: {
        log: 'auth event stream failed to read the flow',
        message: 'Reading the login flow failed',
        unsubscribeLog: 'unsubscribing an auth event stream failed',
      },
      heartbeatMs: options.heartbeatMs,
    },
    http,
  );
}
