-- Up Migration

-- An organisation is the tenant boundary: every other row belongs to exactly one.
CREATE TABLE orgs (
  id           text PRIMARY KEY,
  name         text NOT NULL,
  owner_email  text NOT NULL,
  -- Org-level default cap for projects without their own max_concurrent_sessions.
  default_project_max_concurrent_sessions integer CHECK (default_project_max_concurrent_sessions > 0),
  created_at   timestamptz NOT NULL,
  updated_at   timestamptz NOT NULL
);

CREATE TABLE projects (
  id          text PRIMARY KEY,
  org_id      text NOT NULL REFERENCES orgs(id),
  name        text NOT NULL,
  -- Case- and accent-folded name: names are unique per org under this form.
  name_key    text NOT NULL,
  status      text NOT NULL CHECK (status IN ('active', 'archived')),
  is_default  boolean NOT NULL DEFAULT false,
  created_at  timestamptz NOT NULL,
  updated_at  timestamptz NOT NULL,
  deleted_at  timestamptz
);
CREATE UNIQUE INDEX projects_org_name_key_live ON projects (org_id, name_key) WHERE deleted_at IS NULL;
CREATE UNIQUE INDEX projects_org_default_live ON projects (org_id) WHERE is_default AND deleted_at IS NULL;
CREATE INDEX projects_org_created ON projects (org_id, created_at DESC, id DESC);

-- Per-project caps; NULL means no project cap.
CREATE TABLE project_limits (
  project_id                  text PRIMARY KEY REFERENCES projects(id),
  max_concurrent_sessions     integer CHECK (max_concurrent_sessions > 0),
  max_concurrent_invocations  integer CHECK (max_concurrent_invocations > 0),
  max_pooled_sessions         integer CHECK (max_pooled_sessions > 0),
  updated_at                  timestamptz NOT NULL
);

CREATE TABLE api_keys (
  id                 text PRIMARY KEY,
  org_id             text NOT NULL REFERENCES orgs(id),
  -- NULL: an org-wide key.
  project_id         text REFERENCES projects(id),
  name               text NOT NULL,
  -- SHA-256 of the plaintext key; the plaintext is never stored.
  key_hash           bytea NOT NULL UNIQUE,
  masked_key         text NOT NULL,
  -- days_to_expire given at creation, kept so rotation can reuse the lifetime.
  lifetime_days      integer,
  created_by_key_id  text,
  created_by_name    text,
  created_at         timestamptz NOT NULL,
  expires_at         timestamptz,
  deleted_at         timestamptz
);
CREATE INDEX api_keys_org_created ON api_keys (org_id, created_at DESC, id DESC);
CREATE INDEX api_keys_project ON api_keys (project_id) WHERE deleted_at IS NULL;

-- Down Migration
DROP TABLE api_keys;
DROP TABLE project_limits;
DROP TABLE projects;
DROP TABLE orgs;
