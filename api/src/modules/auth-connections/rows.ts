import type { z } from 'zod';
import type { TelemetryRequest } from '../browsers/telemetry.js';
import type {
  choiceSchema,
  ConnectionStatus,
  CredentialRef,
  discoveredFieldSchema,
  fieldSchema,
  FlowStatus,
  FlowStep,
  FlowType,
  mfaOptionSchema,
  signInOptionSchema,
  ssoButtonSchema,
} from './schema.js';

/**
 * The rows managed auth reads and writes, as plain types: the stores, the views, the
 * re-auth judgement and the flow engine all speak them, and this file imports none of
 * those (so none of them has to import another only for a type).
 */

/** What a flow shows its user at the current step (CONTRACT §5 nested types). */
export interface FlowView {
  fields?: Array<z.output<typeof fieldSchema>>;
  discovered_fields?: Array<z.output<typeof discoveredFieldSchema>>;
  mfa_options?: Array<z.output<typeof mfaOptionSchema>>;
  sign_in_options?: Array<z.output<typeof signInOptionSchema>>;
  pending_sso_buttons?: Array<z.output<typeof ssoButtonSchema>>;
  choices?: Array<z.output<typeof choiceSchema>>;
  external_action_message?: string;
}

/** What a successful login needed: can_reauth is judged from it and the credential. */
export interface LoginRequirements {
  /** Field types the user (or credential) filled, e.g. identifier, password, totp_code. */
  fieldTypes: string[];
  /** The MFA method chosen, when the site asked for one. */
  mfaType: string | null;
  /** The SSO provider used, when the login went through one. */
  ssoProvider: string | null;
}

export interface ConnectionRow {
  id: string;
  org_id: string;
  project_id: string;
  domain: string;
  profile_id: string;
  /** The profile's current name (or the one it was made with, if the profile is gone). */
  profile_name: string;
  allowed_domains: string[];
  auto_reauth: boolean;
  health_checks: boolean;
  health_check_interval: number;
  login_url: string | null;
  proxy_id: string | null;
  record_session: boolean;
  save_credentials: boolean;
  browser_telemetry: TelemetryRequest | null;
  credential: CredentialRef | null;
  credential_id: string | null;
  /** The resolved credential's value names and whether it holds a TOTP secret (null: none). */
  credential_value_keys: string[] | null;
  credential_has_totp: boolean | null;
  status: ConnectionStatus;
  last_auth_check_at: Date | null;
  post_login_url: string | null;
  sso_provider: string | null;
  login_requirements: LoginRequirements | null;
  current_flow_id: string | null;
  /** The AuthConnection resource (namespace/name) that manages the connection; null when the API does. */
  kubernetes_resource: string | null;
  created_at: Date;
  updated_at: Date;
  /** The current flow, joined (null when none ever ran). */
  flow: FlowRow | null;
}

export interface FlowRow {
  id: string;
  connection_id: string;
  org_id: string;
  project_id: string;
  type: FlowType;
  status: FlowStatus;
  step: FlowStep;
  browser_session_id: string | null;
  view: FlowView;
  error_code: string | null;
  error_message: string | null;
  website_error: string | null;
  post_login_url: string | null;
  input_seq: number;
  has_pending_input: boolean;
  handoff_used_at: Date | null;
  driver: string | null;
  heartbeat_at: Date | null;
  expires_at: Date;
  started_at: Date;
  updated_at: Date;
  finished_at: Date | null;
}

export interface TimelineRow {
  id: string;
  type: 'login' | 'reauth' | 'health_check';
  status: string | null;
  step: string | null;
  browser_session_id: string | null;
  error_code: string | null;
  error_message: string | null;
  website_error: string | null;
  previous_status: string | null;
  started_at: Date;
  updated_at: Date;
}
