import type { AppDeps } from '../../app-deps.js';

/** The defaults of BROWSERPLANE_CREDENTIAL_PROVIDER_* (config-credential-providers.ts), for apps composed without them. */
export const PROVIDER_DEFAULTS = {
  timeoutMs: 10_000,
  maxResponseBytes: 8 * 1024 * 1024,
  maxItems: 5000,
  maxPerOrg: 50,
};

export interface ResolvedProviderSettings {
  defaultConnectUrl: string | undefined;
  timeoutMs: number;
  maxResponseBytes: number;
  maxItems: number;
  maxPerOrg: number;
}

export function providerSettings(deps: Pick<AppDeps, 'settings'>): ResolvedProviderSettings {
  const given = deps.settings.credentialProviders ?? {};
  return {
    defaultConnectUrl: given.defaultConnectUrl,
    timeoutMs: given.timeoutMs ?? PROVIDER_DEFAULTS.timeoutMs,
    maxResponseBytes: given.maxResponseBytes ?? PROVIDER_DEFAULTS.maxResponseBytes,
    maxItems: given.maxItems ?? PROVIDER_DEFAULTS.maxItems,
    maxPerOrg: given.maxPerOrg ?? PROVIDER_DEFAULTS.maxPerOrg,
  };
}
