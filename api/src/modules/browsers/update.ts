import type { AppDeps } from '../../app-deps.js';
import { inTransaction } from '../../db/pool.js';
import { AppError, conflict } from '../../http/errors.js';
import { BrowserSettingsError, type LiveBrowserSettings } from '../../../../contract/browser-runtime.js';
import { navigateFirstTab } from './navigate.js';
import { attachProfile } from './profile-archive.js';
import { refuseResizeWhileWatched } from './live-view.js';
import { DEFAULT_VIEWPORT, type UpdateBrowserInput } from './schema.js';
import { getSession, resolveProxy, sessionConflict } from './service.js';
import { findSession, updateSession, type Scope, type SessionChange, type SessionRow } from './store.js';
import { applyTelemetry } from './telemetry.js';
import { createCdpTokens } from './cdp-token.js';
import { telemetrySpecOf } from './telemetry-door.js';

/**
 * PATCH /browsers/{id_or_name}. Absent fields stay as they are. name "" or null clears it;
 * tags replace all tags ({} or null clears); proxy_id "" or null removes it. proxy_id and
 * viewport are applied to the running browser before the change commits: if the agent
 * cannot apply them, nothing is stored and the caller gets 409. A profile can be set only
 * while none is loaded, and only one with nothing saved yet (attachProfile says why). The
 * row is locked for the change, so concurrent PATCHes apply one after the other.
 * start_url then navigates the first tab, best effort (navigate.ts); location and network
 * are accepted and change nothing (docs/newer-clients.md).
 */
export async function updateSessionSettings(deps: AppDeps, scope: Scope, idOrName: string, input: UpdateBrowserInput): Promise<SessionRow> {
  const row = await storeSettings(deps, scope, idOrName, input);
  // After the commit, so the page loads with the new proxy, viewport and profile.
  if (input.start_url) {
    const problem = await navigateFirstTab(deps, row, input.start_url);
    if (problem !== undefined) deps.log.info({ sessionId: row.id, problem }, 'start_url of a browser update did not open');
  }
  return row;
}

async function storeSettings(deps: AppDeps, scope: Scope, idOrName: string, input: UpdateBrowserInput): Promise<SessionRow> {
  let newName: string | null | undefined;
  try {
    return await inTransaction(deps.db, async (tx) => {
      const current = await getSession(tx, scope, idOrName);
      await tx.query('SELECT 1 FROM browser_sessions WHERE id = $1 FOR UPDATE', [current.id]);
      const row = (await findSession(tx, scope, current.id))!;
      const change: SessionChange = { now: deps.clock.now() };
      if (input.name !== undefined) newName = change.name = input.name === null || input.name === '' ? null : input.name;
      if (input.tags !== undefined) change.tags = input.tags ?? {};
      const live: LiveBrowserSettings = {};
      if (input.proxy_id !== undefined) {
        if (input.proxy_id === null || input.proxy_id === '') {
          change.proxyId = null;
          live.proxy = null;
        } else {
          const proxy = await resolveProxy(deps, tx, scope, input.proxy_id);
          change.proxyId = proxy.row.id;
          live.proxy = proxy.endpoint;
        }
      }
      if (input.telemetry !== undefined) {
        change.telemetry = applyTelemetry(row.telemetry, input.telemetry);
        // Switching everything off is sent too (as no categories), so the agent stops capturing.
        if (JSON.stringify(change.telemetry) !== JSON.stringify(row.telemetry) && row.phase === 'running') {
          live.telemetry = await telemetrySpecOf(deps, createCdpTokens(deps), row.id, change.telemetry, { evenIfNone: true });
        }
      }
      if (input.viewport !== undefined) {
        if (input.viewport.force !== true) await refuseResizeWhileWatched(row, deps.agentTokens);
        change.viewport = {
          width: input.viewport.width,
          height: input.viewport.height,
          refresh_rate: input.viewport.refresh_rate ?? DEFAULT_VIEWPORT.refresh_rate,
        };
        live.viewport = { width: change.viewport.width, height: change.viewport.height, refreshRate: change.viewport.refresh_rate };
      }
      if (input.profile !== undefined) {
        const attached = await attachProfile(deps, tx, { scope, session: row, selector: input.profile, now: change.now });
        change.profile = attached.change;
        if (attached.live) live.profile = attached.live;
      }
      await updateSession(tx, row.id, change);
      if (live.proxy !== undefined || live.viewport !== undefined || live.profile !== undefined || live.telemetry !== undefined) await applyLive(deps, row, live);
      return (await findSession(tx, scope, row.id))!;
    });
  } catch (error) {
    throw sessionConflict(error, newName ?? null);
  }
}

/** The running browser takes the new proxy or viewport, or the PATCH fails and its transaction rolls back. */
async function applyLive(deps: AppDeps, row: SessionRow, settings: LiveBrowserSettings): Promise<void> {
  if (row.phase !== 'running') throw conflict('browser_not_ready', 'The browser is still starting; retry the change when it runs');
  try {
    await deps.runtime.applySettings(row.id, settings);
  } catch (error) {
    if (error instanceof BrowserSettingsError) {
      throw new AppError(409, 'browser_settings_not_applied', `The running browser could not take the change: ${error.message}`);
    }
    throw error;
  }
}
