import type { AppDeps } from '../../app-deps.js';
import { inTransaction } from '../../db/pool.js';
import type { TelemetrySpec } from '../../../../contract/telemetry.js';
import { createCdpTokens, type CdpTokens } from './cdp-token.js';
import { lockLiveTelemetry, type SessionRow } from './store.js';
import { enabledCategories, type TelemetryConfig } from './telemetry.js';

/**
 * Where a session's agent pushes its telemetry: the browser-telemetry module's side door,
 * authorised by a token of purpose "telemetry" bound to the session (the profile archive's
 * pattern, cdp-token.ts), so the same agent code works as a child process and in a pod.
 */
export const TELEMETRY_INGEST_PATH = '/internal/browsers/{session_id}/telemetry';

/**
 * The agent's telemetry spec for a session with `config`, or undefined when nothing is
 * captured or the service's internal address is not known yet (the agent then has nowhere
 * to send, and the session runs without telemetry rather than failing).
 */
export async function telemetrySpecOf(
  deps: Pick<AppDeps, 'settings'>,
  tokens: CdpTokens,
  sessionId: string,
  config: TelemetryConfig | null,
  options: { evenIfNone?: boolean } = {},
): Promise<TelemetrySpec | undefined> {
  const categories = enabledCategories(config).filter((c) => c !== 'control');
  const base = deps.settings.internalUrl;
  if (!base || (categories.length === 0 && options.evenIfNone !== true)) return undefined;
  const { token } = await tokens.issue(sessionId, 'telemetry');
  return { ingestUrl: `${base.replace(/\/+$/, '')}/internal/browsers/${encodeURIComponent(sessionId)}/telemetry?token=${token}`, categories };
}

/** The categories the agent captures for a config (control events are the API's own). */
const agentSide = (categories: readonly string[]) => categories.filter((c) => c !== 'control').join(',');

/** Whether two configs capture the same categories at the agent. */
export function sameAgentCategories(a: TelemetryConfig | null, b: TelemetryConfig | null): boolean {
  return agentSide(enabledCategories(a)) === agentSide(enabledCategories(b));
}

/**
 * Tells the running agent to capture as `config` says (no category: it stops capturing).
 * False when the service's internal address is not known (nothing can be captured then);
 * the runtime's error when the agent refuses or cannot be reached.
 */
export async function pushTelemetry(deps: Pick<AppDeps, 'settings' | 'runtime' | 'db' | 'sealer' | 'clock'>, sessionId: string, config: TelemetryConfig | null): Promise<boolean> {
  const telemetry = await telemetrySpecOf(deps, createCdpTokens(deps), sessionId, config, { evenIfNone: true });
  if (!telemetry) return false;
  await deps.runtime.applySettings(sessionId, { telemetry });
  return true;
}

/**
 * A PATCH of telemetry that committed while the browser was starting is stored, but no
 * agent could take it then (update.ts sends only to running browsers). Once the launch
 * has marked the row running, this sends the agent what the row says now if it differs
 * from what the launch spec said. The row is locked while it does, as a PATCH locks it
 * while it sends, so the two send one after the other and the agent ends with the last.
 * Failures are logged: the browser runs on with its launch's categories.
 */
export async function catchUpTelemetry(deps: AppDeps, running: Pick<SessionRow, 'id' | 'telemetry'>, launched: TelemetrySpec | undefined): Promise<void> {
  // The row as marked running is the newest: a PATCH after that found it running and sent its change itself.
  if (agentSide(enabledCategories(running.telemetry)) === agentSide(launched?.categories ?? [])) return;
  const sessionId = running.id;
  try {
    await inTransaction(deps.db, async (tx) => {
      const current = await lockLiveTelemetry(tx, sessionId);
      if (current === undefined) return;
      if (agentSide(enabledCategories(current.telemetry)) === agentSide(launched?.categories ?? [])) return;
      if (await pushTelemetry(deps, sessionId, current.telemetry)) deps.log.info({ sessionId }, 'telemetry changed while the browser started: sent to its agent');
    });
  } catch (error) {
    deps.log.warn({ err: error, sessionId }, 'telemetry changed while the browser started could not be sent to its agent; it captures what it was launched with');
  }
}
