import type { BrowserLaunchSpec, ProxySpec } from '../../../../contract/browser-runtime.js';
import type { TelemetrySpec } from '../../../../contract/telemetry.js';
import type { ExtensionTarget } from '../../../../contract/launch-spec.js';
import type { Scope, SessionRow } from './store.js';

/**
 * How a browser is made, in the columns a session row and a pool row share: POST /browsers
 * passes the session it admitted, the pools' fill the pool it warms for, and both get the
 * same spec for the same configuration.
 */
export type BrowserMake = Pick<
  SessionRow,
  'headless' | 'stealth' | 'kiosk_mode' | 'start_url' | 'viewport_width' | 'viewport_height' | 'viewport_refresh_rate' | 'chrome_policy' | 'profile_id'
>;

export interface LaunchExtras {
  /** The upstream proxy with its credentials opened (resolveProxy), when the browser has one. */
  proxy?: ProxySpec | undefined;
  /** Where the agent fetches the profile from (profileArchiveUrl); without it no profile is loaded. */
  archiveUrl?: string | undefined;
  /** Whether the agent saves the profile back when the browser closes. */
  saveProfile: boolean;
  /** For the runtime: a session's tags, or a warm browser's pool membership. */
  labels: Record<string, string>;
  /** What the agent captures and where it sends it (telemetrySpecOf); absent: nothing. */
  telemetry?: TelemetrySpec | undefined;
  /** Uploaded extensions to load, with their archive URLs (resolveSessionExtensions). */
  extensions?: ExtensionTarget[] | undefined;
}

/** The launch spec of browser `browserId` of `scope`, made as `make` says. */
export function launchSpecOf(browserId: string, scope: Scope, make: BrowserMake, extras: LaunchExtras): BrowserLaunchSpec {
  return {
    browserId,
    orgId: scope.orgId,
    projectId: scope.projectId,
    headless: make.headless,
    stealth: make.stealth,
    kioskMode: make.kiosk_mode,
    viewport: { width: make.viewport_width, height: make.viewport_height, refreshRate: make.viewport_refresh_rate },
    ...(make.start_url !== null ? { startUrl: make.start_url } : {}),
    ...(extras.proxy ? { proxy: extras.proxy } : {}),
    ...(make.profile_id !== null && extras.archiveUrl ? { profile: { id: make.profile_id, archiveUrl: extras.archiveUrl, saveChanges: extras.saveProfile } } : {}),
    ...(extras.extensions?.length ? { extensions: extras.extensions } : {}),
    chromePolicy: make.chrome_policy,
    labels: extras.labels,
    ...(extras.telemetry ? { telemetry: extras.telemetry } : {}),
  };
}
