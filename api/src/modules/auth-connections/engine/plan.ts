import { IDENTIFIER_KEYS, identifierValue } from '../reauth.js';
import type { FlowView, LoginRequirements } from '../rows.js';
import type { LoginPageReading } from './page-types.js';
import type { TotpOptions } from '../../credentials/totp.js';

/**
 * Pure parts of the flow engine, table-tested: what a page reading shows the user, what
 * a credential can fill unattended, and what a finished login needed.
 */

type Field = NonNullable<FlowView['fields']>[number];
type Choice = NonNullable<FlowView['choices']>[number];

const slug = (text: string) =>
  text
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '_')
    .replace(/^_+|_+$/g, '')
    .slice(0, 64) || 'field';

/** The step's view: contract-shaped fields and choices built from a page reading. */
export function viewOf(reading: LoginPageReading): FlowView {
  const fields: Field[] = [];
  const ids = new Set<string>();
  let identifierSeen = false;
  for (const d of reading.fields) {
    let type: Field['type'];
    if (d.type === 'password') type = 'password';
    else if (d.type === 'totp') type = 'totp_code';
    else if (d.type === 'code') type = 'code';
    else if (!identifierSeen && (d.type === 'text' || d.type === 'email' || d.type === 'tel')) {
      type = 'identifier';
      identifierSeen = true;
    } else type = 'text';
    let id = slug(d.name);
    for (let n = 2; ids.has(id); n++) id = `${slug(d.name)}_${n}`;
    ids.add(id);
    const ref =
      type === 'identifier'
        ? (IDENTIFIER_KEYS as readonly string[]).includes(d.name.toLowerCase())
          ? d.name.toLowerCase()
          : d.type === 'email'
            ? 'email'
            : 'username'
        : type === 'password'
          ? 'password'
          : type === 'totp_code'
            ? 'totp_code'
            : type === 'code'
              ? 'code'
              : id;
    fields.push({ id, ref, type, label: d.label, observed_selector: d.selector, required: d.required ?? true });
  }
  const choices: Choice[] = [
    ...reading.mfaOptions.map((o) => ({
      id: `mfa_${o.type}`,
      label: o.label,
      type: 'mfa_method' as const,
      description: o.target ?? o.description,
      observed_selector: o.selector,
    })),
    ...reading.ssoButtons.map((b) => ({ id: `sso_${b.provider}`, label: b.label, type: 'sso_provider' as const, description: null, observed_selector: b.selector })),
    ...reading.signInOptions.map((o) => ({
      id: `signin_${o.id}`,
      label: o.label,
      type: 'sign_in_method' as const,
      description: o.description,
      observed_selector: o.selector,
    })),
  ];
  // Two options of one kind (two "Text message" buttons) keep distinct ids.
  const seen = new Map<string, number>();
  for (const choice of choices) {
    const n = (seen.get(choice.id) ?? 0) + 1;
    seen.set(choice.id, n);
    if (n > 1) choice.id = `${choice.id}_${n}`;
  }
  return {
    fields,
    discovered_fields: reading.fields.map((d) => ({ ...d })),
    mfa_options: reading.mfaOptions.map(({ label, type, description, target }) => ({ label, type, description, target })),
    pending_sso_buttons: reading.ssoButtons.map(({ label, provider, selector }) => ({ label, provider, selector })),
    sign_in_options: reading.signInOptions.map(({ id, label, description }) => ({ id, label, description })),
    choices,
  };
}

export interface Secrets {
  values: Record<string, string>;
  totpSecret: string | null;
  /** How the credential's codes are made (algorithm, digits, period). */
  totpOptions?: TotpOptions | undefined;
  ssoProvider: string | null;
}

/** Marks a field the driver fills with a TOTP code generated at the moment it types it. */
export const GENERATED_TOTP = '\u0000totp';

export interface PlannedStep {
  values: Record<string, string>;
  choiceId?: string;
}

/**
 * What a credential can do at this step with nobody watching: fill every required field,
 * or pick the authenticator app / the credential's SSO provider. Undefined when a person
 * is needed (a code sent by SMS, a missing value, a choice it cannot make).
 */
export function autoStep(view: FlowView, secrets: Secrets | undefined, preferredSso: string | null): PlannedStep | undefined {
  if (!secrets) return undefined;
  const fields = view.fields ?? [];
  const choices = view.choices ?? [];
  if (fields.length > 0) {
    const values: Record<string, string> = {};
    for (const field of fields) {
      let value: string | undefined;
      if (field.type === 'identifier') value = identifierValue(secrets.values, field.ref);
      else if (field.type === 'password') value = secrets.values.password;
      else if (field.type === 'totp_code') value = secrets.totpSecret ? GENERATED_TOTP : undefined;
      else if (field.type === 'text') value = secrets.values[field.ref];
      if (value !== undefined) values[field.id] = value;
      else if (field.required !== false) {
        values.__missing = field.id;
        break;
      }
    }
    if (values.__missing === undefined) return { values };
  }
  const totp = choices.find((c) => c.type === 'mfa_method' && c.id.startsWith('mfa_totp'));
  if (totp && secrets.totpSecret) return { values: {}, choiceId: totp.id };
  const provider = secrets.ssoProvider ?? preferredSso;
  if (provider) {
    const sso = choices.find((c) => c.type === 'sso_provider' && c.id === `sso_${provider.toLowerCase()}`);
    if (sso && fields.length === 0) return { values: {}, choiceId: sso.id };
  }
  return undefined;
}

/** What a finished login needed, accumulated over its steps. */
export function addRequirements(into: LoginRequirements, view: FlowView, step: PlannedStep): void {
  for (const field of view.fields ?? []) {
    if (step.values[field.id] !== undefined && !into.fieldTypes.includes(field.type)) into.fieldTypes.push(field.type);
  }
  const choice = (view.choices ?? []).find((c) => c.id === step.choiceId);
  if (choice?.type === 'mfa_method') into.mfaType = choice.id.replace(/^mfa_/, '').replace(/_\d+$/, '');
  if (choice?.type === 'sso_provider') into.ssoProvider = choice.id.replace(/^sso_/, '').replace(/_\d+$/, '');
}

/**
 * The values a person typed that are worth keeping for re-auth: identifiers, passwords
 * and other text, under their refs. One-time codes never.
 */
export function valuesToSave(view: FlowView, step: PlannedStep): Record<string, string> {
  const keep: Record<string, string> = {};
  for (const field of view.fields ?? []) {
    const value = step.values[field.id];
    if (value === undefined || value === GENERATED_TOTP) continue;
    if (field.type === 'identifier' || field.type === 'password' || field.type === 'text') keep[field.ref] = value;
  }
  return keep;
}

/** Well-known identity providers a login may pass through (CONTRACT §5 allowed_domains). */
export const SSO_PROVIDER_DOMAINS = [
  'accounts.google.com',
  'google.com',
  'login.microsoftonline.com',
  'login.microsoft.com',
  'login.live.com',
  'okta.com',
  'oktapreview.com',
  'auth0.com',
  'appleid.apple.com',
  'idmsa.apple.com',
  'github.com',
  'facebook.com',
  'linkedin.com',
  'amazoncognito.com',
  'onelogin.com',
  'pingidentity.com',
  'pingone.com',
];

/** Whether the flow's browser may open `url` as a page: the domain, the allowed list, IdPs. */
export function navigationAllowed(url: string, domain: string, allowed: readonly string[]): boolean {
  let host: string;
  try {
    const parsed = new URL(url);
    if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') return true;
    host = parsed.hostname.toLowerCase().replace(/\.$/, '');
  } catch {
    return false;
  }
  // Subdomains count (login.example.com for example.com); a parent domain does not, since
  // telling example.co.uk from co.uk would need the public suffix list.
  const within = (d: string) => host === d || host.endsWith(`.${d}`);
  return within(domain) || allowed.some(within) || SSO_PROVIDER_DOMAINS.some(within);
}
