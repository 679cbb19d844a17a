import type { AppDeps } from '../../app-deps.js';
import type { InvocationBrowsers } from '../invocations/browsers.js';
import { createCdpTokens } from './cdp-token.js';
import { presentSession, publicWsBase, regionOf } from './present.js';
import { DELETE_REASONS, endSession } from './service.js';
import { listInvocationSessions } from './store.js';

/**
 * The sessions an invocation owns (created with its invocation_id), for
 * GET/DELETE /invocations/{id}/browsers and for finishing an invocation. The port carries
 * no request, so cdp_ws_url here uses BROWSERPLANE_PUBLIC_URL (ws://localhost without it).
 */
export function invocationBrowsers(deps: AppDeps): InvocationBrowsers {
  const tokens = createCdpTokens(deps);
  return {
    async listActive(db, scope, invocationId) {
      const ctx = { tokens, wsBase: publicWsBase(deps), now: deps.clock.now(), region: regionOf(deps.settings) };
      return Promise.all((await listInvocationSessions(db, scope, invocationId)).map((row) => presentSession(ctx, row)));
    },
    async deleteAll(scope, invocationId) {
      const rows = await listInvocationSessions(deps.db, scope, invocationId);
      // Every browser is closed even if one fails; the first failure is then reported.
      const results = await Promise.allSettled(rows.map((row) => endSession(deps, row, DELETE_REASONS.invocation)));
      const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
      if (failed) throw failed.reason;
    },
  };
}
