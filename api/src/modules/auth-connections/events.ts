import type { Request, Response } from 'express';
import type { AppDeps } from '../../app-deps.js';
import { openSseStream, type SseStream } from '../../http/sse.js';
import { connectionChannel } from './service.js';
import type { FlowRow } from './store.js';
import { isTerminalFlow, presentStateEvent, type ViewContext } from './view.js';

/** The flow a stream follows, read fresh at every notification; 'gone' once deleted. */
export type FlowSource = () => Promise<FlowRow | null | 'gone'>;

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
  options: { heartbeatMs: number },
): Promise<void> {
  const timestamp = () => deps.clock.now().toISOString();
  let stream: SseStream | undefined;
  let lastKey: string | undefined;
  let lastFlow: FlowRow | undefined;
  let pending = Promise.resolve();
  const send = async (out: SseStream) => {
    try {
      const flow = await source();
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
    } catch (error) {
      deps.log.error({ err: error, connectionId }, 'auth event stream failed to read the flow');
      out.send({ event: 'error', error: { code: 'internal_error', message: 'Reading the login flow failed' }, timestamp: timestamp() });
      out.close();
    }
  };
  const refresh = () => {
    pending = pending.then(() => (stream && !stream.closed ? send(stream) : undefined));
  };
  // Subscribe before the first read, so a change between the two is not lost.
  const unsubscribe = await deps.events.subscribe(connectionChannel(connectionId), refresh, refresh);
  try {
    stream = await openSseStream(http.req, http.res, {
      heartbeatMs: options.heartbeatMs,
      heartbeat: () => ({ event: 'sse_heartbeat', timestamp: timestamp() }),
      shutdown: deps.shutdown,
    });
  } catch (error) {
    await unsubscribe();
    throw error;
  }
  stream.onClose(() => {
    unsubscribe().catch((error: unknown) => deps.log.warn({ err: error, connectionId }, 'unsubscribing an auth event stream failed'));
  });
  refresh();
}
