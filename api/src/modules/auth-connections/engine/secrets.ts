import type { AppDeps } from '../../../app-deps.js';
import { ProviderLoginError, resolveProviderSecrets } from '../../credential-providers/index.js';
import { openCredentialSecrets } from '../../credentials/service.js';
import { totpOptionsOf } from '../../credentials/store.js';
import type { ConnectionRow } from '../rows.js';
import { scopeOfConnection } from '../store.js';
import type { Secrets } from './plan.js';

/** Why a login could not get its values: the flow fails with this code and message. */
export class SecretsUnavailable extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = 'SecretsUnavailable';
  }
}

/**
 * The values a login fills in by itself, from one of two sources: the org's external
 * credential provider when the connection names one (fetched now, never stored), else
 * the project's stored credential. Undefined when the connection has neither.
 */
export async function loginSecrets(deps: AppDeps, row: ConnectionRow): Promise<Secrets | undefined> {
  const ref = row.credential;
  if (ref?.provider !== undefined) {
    try {
      const item = await resolveProviderSecrets(deps, row.org_id, { provider: ref.provider, path: ref.path, auto: ref.auto }, row.domain);
      return { values: item.values, totpSecret: item.totpSecret, totpOptions: item.totpOptions, ssoProvider: null };
    } catch (error) {
      if (error instanceof ProviderLoginError) throw new SecretsUnavailable(error.code, error.message);
      throw error;
    }
  }
  if (!row.credential_id) return undefined;
  const opened = await openCredentialSecrets(deps, scopeOfConnection(row), row.credential_id);
  if (!opened) return undefined;
  return { values: opened.values, totpSecret: opened.totpSecret, totpOptions: totpOptionsOf(opened.row), ssoProvider: opened.row.sso_provider };
}
