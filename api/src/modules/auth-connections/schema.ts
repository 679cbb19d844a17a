import { z } from 'zod';
import { paginationQuery } from '../../http/pagination.js';
import { lookupText, timestamp } from '../../http/schemas.js';
import { regionRequest } from '../browsers/schema.js';
import { telemetryRequestSchema } from '../browsers/telemetry.js';
import { hostNameSchema } from '../credentials/schema.js';
import { profileName } from '../profiles/schema.js';
import { CONNECTION_STATUSES, FLOW_STATUSES, FLOW_STEPS, FLOW_TYPES } from '../../../../contract/kinds.js';

/** CONTRACT §5: managed auth connections, their flows, events and timeline. */

export const DEFAULT_HEALTH_CHECK_INTERVAL = 3600;
export const MAX_HEALTH_CHECK_INTERVAL = 86_400;
export const MAX_ALLOWED_DOMAINS = 50;

// The AuthConnection kind reports them too, so they are the contract's.
export { CONNECTION_STATUSES, FLOW_STATUSES, FLOW_STEPS, FLOW_TYPES };
export type FlowStatus = (typeof FLOW_STATUSES)[number];
export type FlowStep = (typeof FLOW_STEPS)[number];
export type FlowType = (typeof FLOW_TYPES)[number];
export type ConnectionStatus = (typeof CONNECTION_STATUSES)[number];
export const TERMINAL_FLOW_STATUSES: readonly FlowStatus[] = ['SUCCESS', 'FAILED', 'EXPIRED', 'CANCELED'];

export const CAN_REAUTH_REASONS = [
  'external_credential',
  'cua_has_credential',
  'has_credential',
  'viable_plans_found',
  'no_requirements_recorded',
  'requirements_satisfiable',
  'no_prior_successful_login',
  'no_credential',
  'no_viable_plans',
  'viable_plans_require_external_action',
  'requires_external_action',
  'requires_totp_without_secret',
  'requires_sms_code',
  'requires_email_code',
] as const;
export type CanReauthReason = (typeof CAN_REAUTH_REASONS)[number];

// eslint-disable-next-line no-control-regex -- refusing control characters is the point
const NO_CONTROL = /^[^\u0000-\u001f\u007f-\u009f]*$/u;


const httpUrl = z
  .string()
  .max(2048)
  .refine((text) => {
    try {
      const url = new URL(text);
      return (url.protocol === 'http:' || url.protocol === 'https:') && url.username === '' && url.password === '';
    } catch {
      return false;
    }
  }, 'must be an absolute http(s) URL without user info');

const proxyRef = z
  .strictObject({
    id: lookupText.optional().describe('Proxy id'),
    name: lookupText.optional().describe('Proxy name; must match exactly one proxy of the project'),
  })
  .refine((p) => (p.id === undefined) !== (p.name === undefined), { message: 'give exactly one of id or name' })
  .describe('The proxy the flow’s browsers use');

const credentialRef = z
  .strictObject({
    name: lookupText.optional().describe('A credential of the project, by name (or id)'),
    provider: lookupText.optional().describe('An external credential provider'),
    path: lookupText.optional().describe('The item in the provider, e.g. Vault/Item'),
    auto: z.boolean().optional().describe('Look the item up in the provider by domain'),
  })
  .refine((c) => c.name !== undefined || c.provider !== undefined, { message: 'give a name, or a provider with path or auto' })
  .refine((c) => !(c.name !== undefined && c.provider !== undefined), { message: 'name cannot be combined with provider' })
  .refine((c) => c.provider === undefined || (c.path !== undefined) !== (c.auto === true), {
    message: 'a provider needs exactly one of path or auto: true',
  })
  .refine((c) => c.provider !== undefined || (c.path === undefined && c.auto === undefined), {
    message: 'path and auto need a provider',
  });
export type CredentialRef = z.output<typeof credentialRef>;

const allowedDomains = z
  .array(hostNameSchema)
  .max(MAX_ALLOWED_DOMAINS)
  .describe('Extra domains the flow’s browser may navigate to (subdomains included); well-known SSO identity providers are always allowed');

const healthCheckInterval = z
  .number()
  .int()
  .max(MAX_HEALTH_CHECK_INTERVAL)
  .describe(`Seconds between health checks (default ${DEFAULT_HEALTH_CHECK_INTERVAL}, at most ${MAX_HEALTH_CHECK_INTERVAL}; the lower bound is a service setting, 300 by default)`);

const telemetry = telemetryRequestSchema.nullable();

/**
 * The `browser` object newer SDKs send (Python 0.131 ManagedAuthBrowserConfig). Its
 * proxy and telemetry are the same settings as the top-level proxy and
 * browser_telemetry, and are applied as those; region and stealth are accepted and
 * change nothing (one region here; flow browsers' settings are the service's). A proxy
 * mode asks for the default egress, which is no proxy here.
 */
const browserConfig = z
  .strictObject({
    proxy: z
      .strictObject({
        id: lookupText.optional().describe('Proxy id'),
        name: lookupText.optional().describe('Proxy name'),
        mode: z.enum(['direct', 'default']).optional().describe('No proxy (the default egress here)'),
      })
      .refine((p) => [p.id, p.name, p.mode].filter((v) => v !== undefined).length === 1, { message: 'give exactly one of mode, id or name' })
      .optional(),
    region: regionRequest.optional(),
    stealth: z.boolean().optional().describe('Ignored: flow browsers use the service’s settings'),
    telemetry: telemetry.optional().describe('Same as browser_telemetry'),
  })
  .describe('Browser settings of the flow’s browsers, as newer SDKs send them: proxy and telemetry applied, region and stealth ignored');

type BrowserConfig = z.output<typeof browserConfig>;
type ProxyAndTelemetry = { proxy?: z.output<typeof proxyRef> | undefined; browser_telemetry?: z.output<typeof telemetry> | undefined };

/** Both the top level and `browser` naming a proxy or telemetry is ambiguous: refused. */
function refuseDoubles(body: ProxyAndTelemetry & { browser?: BrowserConfig | undefined }, ctx: z.RefinementCtx, where: 'create' | 'update' | 'login'): void {
  if (body.browser?.proxy !== undefined && body.proxy !== undefined) {
    ctx.addIssue({ code: 'custom', path: ['browser', 'proxy'], message: 'give the proxy once: in proxy or in browser.proxy' });
  }
  if (body.browser?.telemetry !== undefined && body.browser_telemetry !== undefined) {
    ctx.addIssue({ code: 'custom', path: ['browser', 'telemetry'], message: 'give telemetry once: in browser_telemetry or in browser.telemetry' });
  }
  if (where === 'update' && body.browser?.proxy?.mode !== undefined) {
    ctx.addIssue({ code: 'custom', path: ['browser', 'proxy', 'mode'], message: 'cannot remove a connection’s proxy; give a proxy id or name' });
  }
}

/** The `browser` object folded into the top-level fields the service reads. */
function foldBrowser<T extends ProxyAndTelemetry & { browser?: BrowserConfig | undefined }>({ browser, ...rest }: T): Omit<T, 'browser'> {
  const proxy = browser?.proxy;
  return {
    ...rest,
    ...(proxy?.id !== undefined ? { proxy: { id: proxy.id } } : proxy?.name !== undefined ? { proxy: { name: proxy.name } } : {}),
    ...(browser?.telemetry !== undefined ? { browser_telemetry: browser.telemetry } : {}),
  };
}

const settingFields = {
  allowed_domains: allowedDomains.optional(),
  auto_reauth: z.boolean().optional().describe('Re-authenticate unattended when a health check finds the login gone (default true)'),
  browser_telemetry: telemetry.optional(),
  credential: credentialRef.optional(),
  health_check_interval: healthCheckInterval.optional(),
  health_checks: z.boolean().optional().describe('Check periodically that the profile is still logged in (default true)'),
  proxy: proxyRef.optional(),
  record_session: z.boolean().optional().describe('Record the flow’s browser (default false)'),
  save_credentials: z.boolean().optional().describe('Store what the user submits in a credential for re-auth; one-time codes never (default true)'),
};
const sharedFields = { ...settingFields, browser: browserConfig.optional() };

const createConnectionFields = {
  domain: hostNameSchema.describe('The site to stay logged into, e.g. example.com'),
  profile_name: profileName.describe('The profile kept logged in; created when missing'),
  login_url: httpUrl.optional().describe('The login page; without it the flow finds it from the domain'),
};

/** An AuthConnection manifest's spec (the operator's CRD is generated from it). */
export const createConnectionBody = z.strictObject({ ...createConnectionFields, ...settingFields });

/** POST /auth/connections: the manifest's fields and the `browser` object newer SDKs send. */
export const createConnectionHttpBody = z
  .strictObject({ ...createConnectionFields, ...sharedFields })
  .superRefine((body, ctx) => refuseDoubles(body, ctx, 'create'))
  .transform(foldBrowser)
  .meta({ id: 'ManagedAuthCreateRequest' });
export type CreateConnectionInput = z.output<typeof createConnectionBody>;

export const updateConnectionBody = z
  .strictObject({
    login_url: httpUrl.or(z.literal('')).optional().describe('The login page; "" clears it'),
    ...sharedFields,
  })
  .superRefine((body, ctx) => refuseDoubles(body, ctx, 'update'))
  .transform(foldBrowser)
  .meta({ id: 'ManagedAuthUpdateRequest' });
export type UpdateConnectionInput = z.output<typeof updateConnectionBody>;

export const connectionParams = z.object({ id: lookupText.describe('Auth connection id') });

export const listConnectionsQuery = z.object({
  ...paginationQuery,
  domain: hostNameSchema.optional().describe('Only connections for exactly this domain'),
  profile_name: lookupText.optional().describe('Only connections of this profile (by name)'),
  query: lookupText.optional().describe('Case-insensitive substring of the domain or profile name, or an exact id'),
});

export const loginBody = z
  .strictObject({
    browser_telemetry: telemetry.optional(),
    proxy: proxyRef.optional(),
    record_session: z.boolean().optional(),
    browser: browserConfig.optional(),
  })
  .superRefine((body, ctx) => refuseDoubles(body, ctx, 'login'))
  .transform(foldBrowser)
  .meta({ id: 'ManagedAuthLoginRequest' });
export type LoginInput = z.output<typeof loginBody>;

const fieldValue = z.string().max(4096);
const fieldMap = z
  .record(z.string().min(1).max(255).regex(NO_CONTROL, 'must not contain control characters'), fieldValue)
  .refine((m) => Object.keys(m).length <= 64, 'at most 64 values');

export const submitBody = z
  .strictObject({
    field_values: fieldMap.optional().describe('Values keyed by Field.id'),
    selected_choice_id: lookupText.optional().describe('A Choice.id offered by the current step'),
    fields: fieldMap.optional().describe('Legacy: values keyed by DiscoveredField.name'),
    mfa_option_id: lookupText.optional().describe('Legacy: an MFA option (its type or choice id)'),
    sign_in_option_id: lookupText.optional().describe('Legacy: a sign-in option id'),
    sso_button_selector: z.string().min(1).max(2048).optional().describe('Legacy: the XPath of a pending SSO button'),
    sso_provider: lookupText.optional().describe('Legacy: the provider of a pending SSO button'),
  })
  .refine((b) => !(b.sso_button_selector !== undefined && b.sso_provider !== undefined), {
    message: 'sso_provider cannot be combined with sso_button_selector',
    path: ['sso_provider'],
  })
  .meta({ id: 'ManagedAuthSubmitRequest' });
export type SubmitInput = z.output<typeof submitBody>;

export const timelineQuery = z.object({
  ...paginationQuery,
  type: z.enum(['login', 'reauth', 'health_check']).optional().describe('Only entries of this type'),
});

// ---- responses ---------------------------------------------------------------------

const mfaType = z.enum(['sms', 'call', 'email', 'totp', 'push', 'password', 'switch']);

export const choiceSchema = z
  .object({
    id: z.string(),
    label: z.string(),
    type: z.enum(['mfa_method', 'sso_provider', 'sign_in_method', 'auth_method', 'identifier_method', 'account', 'other']),
    description: z.string().nullable().optional(),
    observed_selector: z.string().nullable().optional(),
  })
  .meta({ id: 'ManagedAuthChoice' });

export const discoveredFieldSchema = z
  .object({
    label: z.string(),
    name: z.string(),
    selector: z.string(),
    type: z.enum(['text', 'email', 'password', 'tel', 'number', 'url', 'code', 'totp']),
    hint: z.string().optional(),
    linked_mfa_type: mfaType.nullable().optional(),
    placeholder: z.string().optional(),
    required: z.boolean().optional(),
  })
  .meta({ id: 'ManagedAuthDiscoveredField' });

export const fieldSchema = z
  .object({
    id: z.string(),
    ref: z.string().describe('The credential value this field is stored under'),
    type: z.enum(['identifier', 'password', 'code', 'totp_code', 'totp_secret', 'text']),
    label: z.string().optional(),
    observed_selector: z.string().nullable().optional(),
    required: z.boolean().optional(),
  })
  .meta({ id: 'ManagedAuthField' });

export const mfaOptionSchema = z
  .object({ label: z.string(), type: mfaType, description: z.string().nullable().optional(), target: z.string().nullable().optional() })
  .meta({ id: 'ManagedAuthMfaOption' });

export const ssoButtonSchema = z
  .object({ label: z.string(), provider: z.string(), selector: z.string().describe('XPath') })
  .meta({ id: 'ManagedAuthPendingSsoButton' });

export const signInOptionSchema = z
  .object({ id: z.string(), label: z.string(), description: z.string().nullable().optional() })
  .meta({ id: 'ManagedAuthSignInOption' });

const flowStatus = z.enum(FLOW_STATUSES);
const flowStep = z.enum(FLOW_STEPS);
const flowType = z.enum(FLOW_TYPES);

export const connectionSchema = z
  .object({
    id: z.string(),
    domain: z.string(),
    profile_name: z.string(),
    record_session: z.boolean(),
    save_credentials: z.boolean(),
    status: z.enum(CONNECTION_STATUSES),
    allowed_domains: z.array(z.string()).optional(),
    auto_reauth: z.boolean().optional(),
    browser_session_id: z.string().nullable().optional(),
    browser_telemetry: telemetryRequestSchema.nullable().optional(),
    can_reauth: z.boolean().optional(),
    can_reauth_reason: z.enum(CAN_REAUTH_REASONS).optional(),
    choices: z.array(choiceSchema).nullable().optional(),
    credential: z
      .object({ name: z.string().optional(), provider: z.string().optional(), path: z.string().optional(), auto: z.boolean().optional() })
      .optional(),
    discovered_fields: z.array(discoveredFieldSchema).nullable().optional(),
    error_code: z.string().nullable().optional(),
    error_message: z.string().nullable().optional(),
    external_action_message: z.string().nullable().optional(),
    fields: z.array(fieldSchema).nullable().optional(),
    flow_expires_at: timestamp.nullable().optional(),
    flow_status: flowStatus.nullable().optional(),
    flow_step: flowStep.nullable().optional(),
    flow_type: flowType.nullable().optional(),
    health_check_interval: z.number().nullable().optional(),
    health_checks: z.boolean().optional(),
    hosted_url: z.string().nullable().optional(),
    last_auth_at: timestamp.optional().describe('Deprecated alias of last_auth_check_at'),
    last_auth_check_at: timestamp.optional(),
    live_view_url: z.string().nullable().optional(),
    login_url: z.string().optional(),
    mfa_options: z.array(mfaOptionSchema).nullable().optional(),
    pending_sso_buttons: z.array(ssoButtonSchema).nullable().optional(),
    post_login_url: z.string().optional(),
    proxy_id: z.string().optional(),
    sign_in_options: z.array(signInOptionSchema).nullable().optional(),
    sso_provider: z.string().nullable().optional(),
    website_error: z.string().nullable().optional(),
    created_at: timestamp.optional().describe('When the connection was created (a Browserplane addition to the contract)'),
    updated_at: timestamp.optional().describe('When the connection last changed (a Browserplane addition to the contract)'),
  })
  .meta({ id: 'ManagedAuth' });

export const loginResponseSchema = z
  .object({
    id: z.string().describe('The flow id'),
    flow_type: flowType,
    hosted_url: z.string().describe('The hosted login page, with its one-time handoff code in the fragment'),
    flow_expires_at: timestamp,
    handoff_code: z.string().optional().describe('One-time code the hosted page exchanges for a page session'),
    live_view_url: z.string().optional(),
  })
  .meta({ id: 'ManagedAuthLoginResponse' });

export const submitResponseSchema = z
  .object({ accepted: z.boolean().describe('Whether the flow took the submission (false when it was not awaiting input)') })
  .meta({ id: 'ManagedAuthSubmitResponse' });

export const timelineEventSchema = z
  .object({
    id: z.string(),
    type: z.enum(['login', 'reauth', 'health_check']),
    status: z.enum([...FLOW_STATUSES, ...CONNECTION_STATUSES]),
    timestamp,
    browser_session_id: z.string().optional(),
    error_code: z.string().optional(),
    error_message: z.string().optional(),
    previous_status: z.enum(CONNECTION_STATUSES).optional(),
    replay_id: z.string().optional(),
    step: z
      .enum(['INITIALIZED', 'DISCOVERING', 'AWAITING_INPUT', 'AWAITING_EXTERNAL_ACTION', 'AWAITING_HUMAN_INTERVENTION', 'SUBMITTING', 'COMPLETED', 'EXPIRED'])
      .optional(),
    telemetry_captured: z.boolean().optional(),
    updated_at: timestamp.optional(),
    website_error: z.string().optional(),
  })
  .meta({ id: 'ManagedAuthTimelineEvent' });
