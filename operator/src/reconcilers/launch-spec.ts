/**
 * The launch spec of a BrowserSession, as the API hands it over: a Secret named
 * `<resource name>-launch` whose key `spec.json` holds the BrowserLaunchSpec (it may carry a
 * decrypted proxy password, hence a Secret, and hence never logged).
 */
import type { V1Secret } from '@kubernetes/client-node';
import { LAUNCH_SPEC_KEY } from '../../../contract/kinds.js';
import type { BrowserLaunchSpec } from '../../../contract/browser-runtime.js';
import type { LaunchSpecState } from './browser-session-plan.js';


export type ParsedLaunchSpec = LaunchSpecState & { spec?: BrowserLaunchSpec };

/** The launch spec from the API's Secret, checked just enough to be this session's. Never logged: it may hold a proxy password. */
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
  const object = (value: unknown) => typeof value === 'object' && value !== null && !Array.isArray(value);
  if (!object(spec)) return { state: 'invalid', message: `Secret ${secret.metadata?.name}: ${LAUNCH_SPEC_KEY} is not a JSON object` };
  const candidate = spec as Partial<BrowserLaunchSpec>;
  if (candidate.browserId !== sessionId) return { state: 'invalid', message: `Secret ${secret.metadata?.name}: the launch spec is for browser ${String(candidate.browserId)}, not ${sessionId}` };
  if (typeof candidate.headless !== 'boolean' || !object(candidate.viewport)) {
    return { state: 'invalid', message: `Secret ${secret.metadata?.name}: the launch spec lacks headless or viewport` };
  }
  return { state: 'present', spec: { ...candidate, labels: candidate.labels ?? {}, chromePolicy: candidate.chromePolicy ?? {} } as BrowserLaunchSpec };
}
