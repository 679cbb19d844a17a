-- Up Migration

-- The app runtime (issue 21): a deployment uploads code (a file, a zip or a git source),
-- a build installs its dependencies and reads which apps and actions its entrypoint
-- registers, and each app it registers becomes an app version that invocations run.
CREATE TABLE deployments (
  id                   text PRIMARY KEY,
  -- Creation order, to order deployments that share a created_at (newest first).
  seq                  bigint GENERATED ALWAYS AS IDENTITY,
  org_id               text NOT NULL REFERENCES orgs(id),
  project_id           text NOT NULL REFERENCES projects(id),
  status               text NOT NULL CHECK (status IN ('queued', 'in_progress', 'running', 'failed', 'stopped')),
  status_reason        text,
  -- The entrypoint, relative to the source root (the zip's or the repository's path).
  entrypoint_rel_path  text NOT NULL,
  env_vars             jsonb NOT NULL DEFAULT '{}',
  -- The version every app of this deployment gets ('latest' unless the caller names one).
  version              text NOT NULL,
  force                boolean NOT NULL DEFAULT false,
  source_type          text NOT NULL CHECK (source_type IN ('file', 'github')),
  source_url           text,
  source_ref           text,
  source_path          text,
  -- sha256 of the uploaded bytes (file) or the commit built (git): where the source lies
  -- in the content-addressed store.
  source_checksum      text,
  created_at           timestamptz NOT NULL,
  updated_at           timestamptz NOT NULL,
  deleted_at           timestamptz,
  UNIQUE (project_id, id)
);
CREATE INDEX deployments_project_created ON deployments (project_id, created_at DESC, seq DESC) WHERE deleted_at IS NULL;

-- One app of a deployment's build, at the deployment's version. Invocations name
-- (app_name, version, action_name) and run the live row's build.
CREATE TABLE app_versions (
  id             text PRIMARY KEY,
  seq            bigint GENERATED ALWAYS AS IDENTITY,
  org_id         text NOT NULL REFERENCES orgs(id),
  project_id     text NOT NULL REFERENCES projects(id),
  deployment_id  text NOT NULL,
  app_name       text NOT NULL,
  version        text NOT NULL,
  runtime        text NOT NULL CHECK (runtime IN ('node', 'python')),
  -- The built entry the runner loads, relative to the deployment's build dir.
  entry          text NOT NULL,
  -- [{name, input_schema?, output_schema?}], as the app registry reported them.
  actions        jsonb NOT NULL,
  env_vars       jsonb NOT NULL DEFAULT '{}',
  created_at     timestamptz NOT NULL,
  deleted_at     timestamptz,
  FOREIGN KEY (project_id, deployment_id) REFERENCES deployments (project_id, id)
);
-- Two versions of an app coexist; one (app, version) is live at a time (force replaces it).
CREATE UNIQUE INDEX app_versions_live ON app_versions (project_id, app_name, version) WHERE deleted_at IS NULL;
CREATE INDEX app_versions_deployment ON app_versions (deployment_id);

-- Build log lines and state changes of a deployment, for GET /deployments/{id}/events
-- (replayed from `since`, then followed).
CREATE TABLE deployment_events (
  deployment_id  text NOT NULL REFERENCES deployments(id) ON DELETE CASCADE,
  seq            bigint GENERATED ALWAYS AS IDENTITY,
  at             timestamptz NOT NULL,
  -- The SSE frame's JSON (a log, deployment_state or app_version_summary event).
  event          jsonb NOT NULL,
  PRIMARY KEY (deployment_id, seq)
);

-- An invocation's own log lines (the action's stdout and stderr), for its events stream.
CREATE TABLE invocation_events (
  invocation_id  text NOT NULL REFERENCES invocations(id) ON DELETE CASCADE,
  seq            bigint GENERATED ALWAYS AS IDENTITY,
  at             timestamptz NOT NULL,
  event          jsonb NOT NULL,
  PRIMARY KEY (invocation_id, seq)
);

-- Down Migration

DROP TABLE invocation_events;
DROP TABLE deployment_events;
DROP TABLE app_versions;
DROP TABLE deployments;
