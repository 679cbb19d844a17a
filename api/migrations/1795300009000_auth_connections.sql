-- Up Migration

-- Managed auth: a connection keeps one profile logged into one domain. Its login and
-- re-auth attempts are auth_flows rows; its health checks are auth_health_checks rows;
-- the timeline is the union of the two. Deleting a connection removes all three.
CREATE TABLE auth_connections (
  id                     text PRIMARY KEY,
  org_id                 text NOT NULL REFERENCES orgs(id),
  project_id             text NOT NULL REFERENCES projects(id),
  seq                    bigint GENERATED ALWAYS AS IDENTITY,
  domain                 text NOT NULL,
  profile_id             text NOT NULL REFERENCES profiles(id),
  -- The name the connection was made with: shown if the profile is later deleted.
  profile_name           text NOT NULL,
  allowed_domains        text[] NOT NULL DEFAULT '{}',
  auto_reauth            boolean NOT NULL,
  health_checks          boolean NOT NULL,
  health_check_interval  integer NOT NULL CHECK (health_check_interval BETWEEN 1 AND 86400),
  login_url              text,
  proxy_id               text,
  record_session         boolean NOT NULL,
  save_credentials       boolean NOT NULL,
  browser_telemetry      jsonb,
  -- CredentialRef as sent: {name} | {provider, path} | {provider, auto}.
  credential             jsonb,
  -- The credential a {name} ref resolved to (or the one save_credentials made).
  credential_id          text REFERENCES credentials(id) ON DELETE SET NULL,
  status                 text NOT NULL DEFAULT 'NEEDS_AUTH' CHECK (status IN ('AUTHENTICATED', 'NEEDS_AUTH')),
  last_auth_check_at     timestamptz,
  post_login_url         text,
  sso_provider           text,
  -- What the last successful login needed (field types, MFA method, SSO): can_reauth is
  -- computed from it and the credential.
  login_requirements     jsonb,
  -- The connection's latest flow, whose state ManagedAuth shows.
  current_flow_id        text,
  created_at             timestamptz NOT NULL,
  updated_at             timestamptz NOT NULL
);
CREATE UNIQUE INDEX auth_connections_profile_domain ON auth_connections (project_id, profile_id, domain);
CREATE INDEX auth_connections_project_created ON auth_connections (org_id, project_id, created_at DESC, seq DESC);

CREATE TABLE auth_flows (
  id                   text PRIMARY KEY,
  connection_id        text NOT NULL REFERENCES auth_connections(id) ON DELETE CASCADE,
  org_id               text NOT NULL,
  project_id           text NOT NULL,
  seq                  bigint GENERATED ALWAYS AS IDENTITY,
  type                 text NOT NULL CHECK (type IN ('LOGIN', 'REAUTH')),
  status               text NOT NULL CHECK (status IN ('IN_PROGRESS', 'SUCCESS', 'FAILED', 'EXPIRED', 'CANCELED')),
  step                 text NOT NULL,
  browser_session_id   text,
  -- The step's view for the client: fields, discovered_fields, mfa_options,
  -- sign_in_options, pending_sso_buttons, choices, external_action_message.
  view                 jsonb NOT NULL DEFAULT '{}',
  error_code           text,
  error_message        text,
  website_error        text,
  post_login_url       text,
  -- A submission waiting for the driver (sealed: it holds passwords), and its counter.
  pending_input        text,
  input_seq            integer NOT NULL DEFAULT 0,
  -- The hosted page: a one-time handoff code, exchanged for a page session (hashes only).
  handoff_hash         text,
  handoff_used_at      timestamptz,
  page_token_hash      text,
  -- The replica driving the flow and its last sign of life: a flow whose driver went
  -- silent is failed by any replica's sweep.
  driver               text,
  heartbeat_at         timestamptz,
  expires_at           timestamptz NOT NULL,
  started_at           timestamptz NOT NULL,
  updated_at           timestamptz NOT NULL,
  finished_at          timestamptz
);
CREATE INDEX auth_flows_connection ON auth_flows (connection_id, started_at DESC, seq DESC);
CREATE INDEX auth_flows_running ON auth_flows (heartbeat_at) WHERE status = 'IN_PROGRESS';
-- At most one flow runs per connection.
CREATE UNIQUE INDEX auth_flows_one_running ON auth_flows (connection_id) WHERE status = 'IN_PROGRESS';

CREATE TABLE auth_health_checks (
  id                   text PRIMARY KEY,
  connection_id        text NOT NULL REFERENCES auth_connections(id) ON DELETE CASCADE,
  seq                  bigint GENERATED ALWAYS AS IDENTITY,
  status               text CHECK (status IN ('AUTHENTICATED', 'NEEDS_AUTH')),
  previous_status      text,
  browser_session_id   text,
  error_code           text,
  error_message        text,
  started_at           timestamptz NOT NULL,
  updated_at           timestamptz NOT NULL
);
CREATE INDEX auth_health_checks_connection ON auth_health_checks (connection_id, started_at DESC, seq DESC);

-- Down Migration
DROP TABLE auth_health_checks;
DROP TABLE auth_flows;
DROP TABLE auth_connections;
