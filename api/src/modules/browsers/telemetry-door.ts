import type { AppDeps } from '../../app-deps.js';
import type { TelemetrySpec } from '../../../../contract/telemetry.js';
import type { CdpTokens } from './cdp-token.js';
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
