import type { CdpTokens } from '../browsers/cdp-token.js';
import { liveViewPath } from '../browsers/live-view.js';
import { judgeReauth } from './reauth.js';
import { TERMINAL_FLOW_STATUSES } from './schema.js';
import type { ConnectionRow, FlowRow, TimelineRow } from './rows.js';

export type { FlowView } from './rows.js';

export interface ViewContext {
  /** http(s)://host of the service as clients reach it. */
  httpBase: string;
  tokens: CdpTokens;
}

export const hostedPath = (flowId: string) => `/auth/hosted/${encodeURIComponent(flowId)}`;

export const isRunning = (flow: Pick<FlowRow, 'status'> | null): boolean => flow?.status === 'IN_PROGRESS';

export async function liveViewUrl(ctx: ViewContext, sessionId: string): Promise<string> {
  const { token } = await ctx.tokens.issue(sessionId);
  return `${ctx.httpBase}${liveViewPath(sessionId)}?token=${token}`;
}

/** The flow fields of ManagedAuth and of the SSE state event, from the current flow. */
async function flowFields(ctx: ViewContext, flow: FlowRow) {
  const running = isRunning(flow);
  const view = running ? flow.view : {};
  return {
    flow_status: flow.status,
    // A finished flow is COMPLETED, whatever step it stopped at (the timeline keeps that).
    flow_step: running ? flow.step : ('COMPLETED' as const),
    flow_type: flow.type,
    flow_expires_at: flow.expires_at.toISOString(),
    browser_session_id: running ? flow.browser_session_id : null,
    live_view_url: running && flow.browser_session_id ? await liveViewUrl(ctx, flow.browser_session_id) : null,
    hosted_url: running ? `${ctx.httpBase}${hostedPath(flow.id)}` : null,
    fields: view.fields ?? null,
    discovered_fields: view.discovered_fields ?? null,
    mfa_options: view.mfa_options ?? null,
    sign_in_options: view.sign_in_options ?? null,
    pending_sso_buttons: view.pending_sso_buttons ?? null,
    choices: view.choices ?? null,
    external_action_message: view.external_action_message ?? null,
    error_code: flow.error_code,
    error_message: flow.error_message,
    website_error: flow.website_error,
  };
}

const NO_FLOW = {
  flow_status: null,
  flow_step: null,
  flow_type: null,
  flow_expires_at: null,
  browser_session_id: null,
  live_view_url: null,
  hosted_url: null,
  fields: null,
  discovered_fields: null,
  mfa_options: null,
  sign_in_options: null,
  pending_sso_buttons: null,
  choices: null,
  external_action_message: null,
  error_code: null,
  error_message: null,
  website_error: null,
};

/** ManagedAuth (CONTRACT §5). */
export async function presentConnection(ctx: ViewContext, row: ConnectionRow) {
  const reauth = judgeReauth(row);
  return {
    id: row.id,
    domain: row.domain,
    profile_name: row.profile_name,
    status: row.status,
    record_session: row.record_session,
    save_credentials: row.save_credentials,
    allowed_domains: row.allowed_domains,
    auto_reauth: row.auto_reauth,
    health_checks: row.health_checks,
    health_check_interval: row.health_check_interval,
    browser_telemetry: row.browser_telemetry,
    ...(row.credential ? { credential: row.credential } : {}),
    ...(row.login_url !== null ? { login_url: row.login_url } : {}),
    ...(row.post_login_url !== null ? { post_login_url: row.post_login_url } : {}),
    ...(row.proxy_id !== null ? { proxy_id: row.proxy_id } : {}),
    ...(row.last_auth_check_at ? { last_auth_check_at: row.last_auth_check_at.toISOString(), last_auth_at: row.last_auth_check_at.toISOString() } : {}),
    sso_provider: row.sso_provider,
    can_reauth: reauth.can,
    can_reauth_reason: reauth.reason,
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
    ...(row.flow ? await flowFields(ctx, row.flow) : NO_FLOW),
  };
}

/**
 * The SSE managed_auth_state event: the flow's fields with nulls left out (the event's
 * optional fields are strings or arrays, never null: CONTRACT §5).
 */
export async function presentStateEvent(ctx: ViewContext, flow: FlowRow, timestamp: string) {
  const fields = await flowFields(ctx, flow);
  const { flow_status, flow_step, flow_expires_at: _expires, browser_session_id: _session, ...rest } = fields;
  const event: { event: 'managed_auth_state'; [field: string]: unknown } = { event: 'managed_auth_state', flow_status, flow_step, timestamp };
  for (const [key, value] of Object.entries(rest)) if (value !== null) event[key] = value;
  if (flow.post_login_url) event.post_login_url = flow.post_login_url;
  return event;
}

export const isTerminalFlow = (flow: Pick<FlowRow, 'status'>) => TERMINAL_FLOW_STATUSES.includes(flow.status);

/** ManagedAuthTimelineEvent. */
export function presentTimelineEvent(row: TimelineRow) {
  const flowStep = row.type === 'health_check' ? undefined : row.status === 'EXPIRED' ? 'EXPIRED' : row.status === 'IN_PROGRESS' ? row.step : 'COMPLETED';
  return {
    id: row.id,
    type: row.type,
    status: row.status,
    timestamp: row.started_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
    ...(row.browser_session_id ? { browser_session_id: row.browser_session_id } : {}),
    ...(row.error_code ? { error_code: row.error_code } : {}),
    ...(row.error_message ? { error_message: row.error_message } : {}),
    ...(row.website_error ? { website_error: row.website_error } : {}),
    ...(row.previous_status ? { previous_status: row.previous_status } : {}),
    ...(flowStep ? { step: flowStep } : {}),
    telemetry_captured: false,
  };
}
