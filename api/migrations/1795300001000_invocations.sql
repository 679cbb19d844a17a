-- Up Migration

-- One run of an application action. Whoever runs the action finishes it through
-- PATCH /invocations/{id}; queued and running invocations count toward the project's
-- max_concurrent_invocations.
CREATE TABLE invocations (
  id                     text PRIMARY KEY,
  -- Creation order, to order invocations that share a started_at (newest first).
  seq                    bigint GENERATED ALWAYS AS IDENTITY,
  org_id                 text NOT NULL REFERENCES orgs(id),
  project_id             text NOT NULL REFERENCES projects(id),
  app_name               text NOT NULL,
  action_name            text NOT NULL,
  version                text NOT NULL,
  -- No deployments exist yet; kept so the list filter works once they do.
  deployment_id          text,
  status                 text NOT NULL CHECK (status IN ('queued', 'running', 'succeeded', 'failed')),
  status_reason          text,
  is_async               boolean NOT NULL,
  async_timeout_seconds  integer CHECK (async_timeout_seconds BETWEEN 10 AND 3600),
  -- JSON texts, stored as the caller sent them.
  payload                text,
  output                 text,
  started_at             timestamptz NOT NULL,
  finished_at            timestamptz,
  updated_at             timestamptz NOT NULL,
  CHECK ((status IN ('succeeded', 'failed')) = (finished_at IS NOT NULL)),
  CHECK (is_async OR async_timeout_seconds IS NULL),
  -- Target of browsers' (project_id, invocation_id) foreign key: a browser can belong
  -- only to an invocation of its own project.
  UNIQUE (project_id, id)
);
CREATE INDEX invocations_project_started ON invocations (project_id, started_at DESC, seq DESC);
-- The concurrency check counts these.
CREATE INDEX invocations_project_active ON invocations (project_id) WHERE status IN ('queued', 'running');

-- Down Migration

DROP TABLE invocations;
