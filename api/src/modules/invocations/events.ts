import type { Request, Response } from 'express';
import type { AppDeps } from '../../app-deps.js';
import { CoalescedReads } from '../../events/coalesced-reads.js';
import { openSseStream, type SseStream } from '../../http/sse.js';
import { getInvocation, invocationChannel, isTerminal, presentInvocation } from './service.js';
import { findInvocation, type InvocationRow, type Scope } from './store.js';

/** Per app: the streams following one invocation share each re-read (see CoalescedReads). */
const shared = new WeakMap<AppDeps, CoalescedReads<InvocationRow | undefined>>();
function readsOf(deps: AppDeps): CoalescedReads<InvocationRow | undefined> {
  let reads = shared.get(deps);
  if (!reads) shared.set(deps, (reads = new CoalescedReads()));
  return reads;
}

export interface FollowOptions {
  heartbeatMs: number;
}

/**
 * GET /invocations/{id}/events: the current state first, then every change, until the
 * invocation is terminal; then the server closes the stream. Notifications only say
 * "this invocation changed" (level-triggered): each one, and each reconnect of the
 * listener (which may have missed some), re-reads the row and sends it if it differs
 * from the last frame sent.
 */
export async function followInvocation(
  deps: AppDeps,
  scope: Scope,
  id: string,
  http: { req: Request; res: Response },
  options: FollowOptions,
): Promise<void> {
  // Before any header goes out, so an unknown id is an ordinary 404.
  await getInvocation(deps.db, scope, id);
  const timestamp = () => deps.clock.now().toISOString();

  let stream: SseStream | undefined;
  let lastSent: string | undefined;
  let pending = Promise.resolve();
  const refresh = () => {
    pending = pending.then(() => (stream && !stream.closed ? sendCurrentState(stream) : undefined));
  };
  const sendCurrentState = async (out: SseStream) => {
    try {
      const row = await readsOf(deps).fresh(`${scope.orgId}/${scope.projectId}/${id}`, () => findInvocation(deps.db, scope, id));
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
    } catch (error) {
      deps.log.error({ err: error, invocationId: id }, 'invocation event stream failed to read the invocation');
      out.send({ event: 'error', error: { code: 'internal_error', message: 'Reading the invocation failed' }, timestamp: timestamp() });
      out.close();
    }
  };

  // Subscribe before the first read: a change between the two is then not lost.
  const unsubscribe = await deps.events.subscribe(invocationChannel(id), refresh, refresh);
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
    unsubscribe().catch((error: unknown) => deps.log.warn({ err: error, invocationId: id }, 'unsubscribing an invocation stream failed'));
  });
  refresh();
}
