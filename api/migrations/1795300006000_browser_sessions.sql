-- Up Migration

-- One remote browser. The row is the API object and holds the slot that counts toward
-- max_concurrent_sessions from the moment the create is admitted (phase 'starting'),
-- before the runtime has launched anything; a failed launch marks the row deleted.
CREATE TABLE browser_sessions (
  id                     text PRIMARY KEY,
  org_id                 text NOT NULL REFERENCES orgs(id),
  project_id             text NOT NULL REFERENCES projects(id),
  -- Creation order: breaks ties between rows created in the same millisecond.
  seq                    bigint GENERATED ALWAYS AS IDENTITY,
  -- Optional; unique among active sessions of the project under the folded name_key.
  name                   text,
  name_key               text,
  headless               boolean NOT NULL,
  stealth                boolean NOT NULL,
  gpu                    boolean NOT NULL,
  kiosk_mode             boolean NOT NULL,
  start_url              text,
  timeout_seconds        integer NOT NULL CHECK (timeout_seconds BETWEEN 10 AND 259200),
  -- Stored as given: a proxy deleted later leaves the id on past sessions.
  proxy_id               text,
  profile_id             text REFERENCES profiles(id),
  profile_save_changes   boolean NOT NULL DEFAULT false,
  viewport_width         integer NOT NULL CHECK (viewport_width >= 1),
  viewport_height        integer NOT NULL CHECK (viewport_height >= 1),
  viewport_refresh_rate  integer NOT NULL CHECK (viewport_refresh_rate >= 1),
  chrome_policy          jsonb NOT NULL DEFAULT '{}',
  tags                   jsonb NOT NULL DEFAULT '{}',
  -- The effective telemetry categories ({"browser": {...}}), or NULL when nothing is captured.
  telemetry              jsonb,
  invocation_id          text,
  phase                  text NOT NULL CHECK (phase IN ('starting', 'running')),
  agent_url              text,
  started_at             timestamptz,
  created_at             timestamptz NOT NULL,
  updated_at             timestamptz NOT NULL,
  deleted_at             timestamptz,
  deleted_reason         text,
  CHECK ((name IS NULL) = (name_key IS NULL)),
  CHECK ((deleted_at IS NULL) = (deleted_reason IS NULL)),
  -- A browser belongs only to an invocation of its own project.
  FOREIGN KEY (project_id, invocation_id) REFERENCES invocations (project_id, id)
);
CREATE UNIQUE INDEX browser_sessions_project_name_live ON browser_sessions (project_id, name_key)
  WHERE name_key IS NOT NULL AND deleted_at IS NULL;
-- Two live sessions may not write the same profile back.
CREATE UNIQUE INDEX browser_sessions_profile_writer_live ON browser_sessions (profile_id)
  WHERE profile_save_changes AND deleted_at IS NULL;
CREATE INDEX browser_sessions_project_created ON browser_sessions (org_id, project_id, created_at DESC, seq DESC);
-- The concurrency caps count these; the reaper walks them.
CREATE INDEX browser_sessions_org_live ON browser_sessions (org_id, project_id) WHERE deleted_at IS NULL;
CREATE INDEX browser_sessions_invocation_live ON browser_sessions (project_id, invocation_id)
  WHERE invocation_id IS NOT NULL AND deleted_at IS NULL;
CREATE INDEX browser_sessions_tags ON browser_sessions USING gin (tags jsonb_path_ops);

-- Keys the service generates for itself, sealed with the encryption key, so every
-- replica signs and verifies with the same key and restarts keep it. First use: the
-- key that signs cdp_ws_url tokens.
CREATE TABLE service_keys (
  name        text PRIMARY KEY,
  sealed      text NOT NULL,
  created_at  timestamptz NOT NULL
);

-- Down Migration
DROP TABLE service_keys;
DROP TABLE browser_sessions;
