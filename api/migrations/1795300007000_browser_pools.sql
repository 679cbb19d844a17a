-- Up Migration

-- A pool of warm browsers: its configuration (the browsers it makes) and size. The
-- browsers themselves will be browser_sessions rows with pool_id set; this slice stores
-- and serves the configuration only.
CREATE TABLE browser_pools (
  id                         text PRIMARY KEY,
  org_id                     text NOT NULL REFERENCES orgs(id),
  project_id                 text NOT NULL REFERENCES projects(id),
  seq                        bigint GENERATED ALWAYS AS IDENTITY,
  -- Optional; unique among live pools of the project under the folded name_key.
  name                       text,
  name_key                   text,
  size                       integer NOT NULL CHECK (size >= 1),
  fill_rate_per_minute       integer NOT NULL CHECK (fill_rate_per_minute >= 1),
  timeout_seconds            integer NOT NULL CHECK (timeout_seconds BETWEEN 10 AND 259200),
  headless                   boolean NOT NULL,
  stealth                    boolean NOT NULL,
  kiosk_mode                 boolean NOT NULL,
  start_url                  text,
  proxy_id                   text,
  profile_id                 text REFERENCES profiles(id),
  refresh_on_profile_update  boolean NOT NULL,
  viewport_width             integer NOT NULL CHECK (viewport_width >= 1),
  viewport_height            integer NOT NULL CHECK (viewport_height >= 1),
  viewport_refresh_rate      integer NOT NULL CHECK (viewport_refresh_rate >= 1),
  chrome_policy              jsonb NOT NULL DEFAULT '{}',
  -- The effective telemetry categories, or NULL when nothing is captured.
  telemetry                  jsonb,
  -- browser_pool_config as the caller sent it (after validation), for the echo.
  config                     jsonb NOT NULL,
  -- Bumped whenever the browser configuration changes: idle browsers of an older
  -- generation are rebuilt.
  generation                 integer NOT NULL DEFAULT 1,
  created_at                 timestamptz NOT NULL,
  updated_at                 timestamptz NOT NULL,
  deleted_at                 timestamptz,
  CHECK ((name IS NULL) = (name_key IS NULL)),
  CHECK (NOT refresh_on_profile_update OR profile_id IS NOT NULL)
);
CREATE UNIQUE INDEX browser_pools_project_name_live ON browser_pools (project_id, name_key)
  WHERE name_key IS NOT NULL AND deleted_at IS NULL;
CREATE INDEX browser_pools_project_created ON browser_pools (org_id, project_id, created_at DESC, seq DESC);
CREATE INDEX browser_pools_live ON browser_pools (org_id, project_id) WHERE deleted_at IS NULL;

-- Down Migration
DROP TABLE browser_pools;
