/**
 * The launch spec of a BrowserSession, as the API hands it over: a Secret named
 * `<resource name>-launch` whose key `spec.json` holds the BrowserLaunchSpec (it may carry a
 * decrypted proxy password, hence a Secret, and hence never logged).
 */
import type { V1Secret } from '@kubernetes/client-node';
import { LAUNCH_SPEC_KEY } from '../../../contract/kinds.js';
import { browserLaunchSpecSchema, issuesText, type BrowserLaunchSpec } from '../../../contract/launch-spec.js';
import type { LaunchSpecState } from './browser-session-plan.js';

export type ParsedLaunchSpec = LaunchSpecState & { spec?: BrowserLaunchSpec };

/** The launch spec from the API's Secret, checked against the contract's schema and to be this session's. Never logged: it may hold a proxy password. */
export function readLaunchSpec(secret: V1Secret | undefined, sessionId: string): ParsedLaunchSpec {
  if (!secret) return { state: 'absent' };
  const encoded = secret.data?.[LAUNCH_SPEC_KEY];
  if (encoded === undefined) return { state: 'invalid', message: `Secret ${secret.metadata?.name} has no key ${LAUNCH_SPEC_KEY}` };
  let spec: unknown;
  try {
    spec = JSON.parse(Buffer.from(encoded, 'base64').toString('utf8'));
  } catch {
    return { state: 'invalid', message: `Secret ${secret.metadata?.name}: ${LAUNCH_SPEC_KEY} is not JSON` };
  }
  if (typeof spec !== 'object' || spec === null || Array.isArray(spec)) return { state: 'invalid', message: `Secret ${secret.metadata?.name}: ${LAUNCH_SPEC_KEY} is not a JSON object` };
  const candidate = spec as { browserId?: unknown; headless?: unknown; viewport?: unknown };
  if (candidate.browserId !== sessionId) return { state: 'invalid', message: `Secret ${secret.metadata?.name}: the launch spec is for browser ${String(candidate.browserId)}, not ${sessionId}` };
  // The API always writes both; the schema's defaults are the agent's, for specs written by hand.
  if (candidate.headless === undefined || candidate.viewport === undefined) {
    return { state: 'invalid', message: `Secret ${secret.metadata?.name}: the launch spec lacks headless or viewport` };
  }
  const parsed = browserLaunchSpecSchema.safeParse(spec);
  if (!parsed.success) return { state: 'invalid', message: `Secret ${secret.metadata?.name}: ${issuesText(parsed.error, LAUNCH_SPEC_KEY)}` };
  return { state: 'present', spec: parsed.data };
}
