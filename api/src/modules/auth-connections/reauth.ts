import type { CanReauthReason } from './schema.js';
import type { ConnectionRow } from './rows.js';

/** Credential value names an identifier field may be stored under, in order of preference. */
export const IDENTIFIER_KEYS = ['username', 'email', 'login', 'identifier', 'user', 'phone'] as const;

/** The value for an identifier field from a credential's values. */
export function identifierValue(values: Record<string, string>, ref: string): string | undefined {
  if (values[ref] !== undefined) return values[ref];
  for (const key of IDENTIFIER_KEYS) if (values[key] !== undefined) return values[key];
  return undefined;
}

type Judged = { can: boolean; reason: CanReauthReason };

/**
 * can_reauth: whether a re-login could run with nobody watching, judged from what the last
 * successful login needed and what the credential holds. A login that needed a code sent
 * by SMS or e-mail cannot; one that needed an authenticator code can only with a secret.
 */
export function judgeReauth(
  row: Pick<ConnectionRow, 'credential_id' | 'credential_value_keys' | 'credential_has_totp' | 'login_requirements'> & Partial<Pick<ConnectionRow, 'credential'>>,
): Judged {
  // A provider's item is read at login time: what it holds is not known here.
  if (row.credential?.provider !== undefined) return { can: true, reason: 'external_credential' };
  const keys = row.credential_value_keys;
  if (row.credential_id === null || keys === null) return { can: false, reason: 'no_credential' };
  const needs = row.login_requirements;
  if (!needs) return { can: true, reason: 'no_requirements_recorded' };
  if (needs.mfaType === 'sms' || needs.fieldTypes.includes('code')) {
    if (needs.mfaType === 'email') return { can: false, reason: 'requires_email_code' };
    return { can: false, reason: 'requires_sms_code' };
  }
  if (needs.mfaType === 'email') return { can: false, reason: 'requires_email_code' };
  if (needs.mfaType === 'push' || needs.mfaType === 'call') return { can: false, reason: 'requires_external_action' };
  if (needs.fieldTypes.includes('totp_code') && row.credential_has_totp !== true) return { can: false, reason: 'requires_totp_without_secret' };
  const has = new Set(keys);
  if (needs.fieldTypes.includes('identifier') && !IDENTIFIER_KEYS.some((k) => has.has(k))) return { can: false, reason: 'no_viable_plans' };
  if (needs.fieldTypes.includes('password') && !has.has('password')) return { can: false, reason: 'no_viable_plans' };
  return { can: true, reason: 'requirements_satisfiable' };
}
