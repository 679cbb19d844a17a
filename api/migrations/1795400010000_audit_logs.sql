-- Up Migration

-- One row per state-changing API call (docs/audit-logs.md): who (the key), what (method,
-- route, resource), when, and how it ended. Never a body or a query string. Rows belong
-- to the org of the key that called; they are only ever inserted, and deleted by the
-- retention sweep (BROWSERPLANE_AUDIT_LOG_RETENTION_DAYS).
CREATE TABLE audit_logs (
  -- Insertion order: the tie-breaker of rows with the same timestamp in the keyset pages.
  seq            bigserial PRIMARY KEY,
  org_id         text NOT NULL REFERENCES orgs(id),
  -- The project the call acted in (NULL on org routes, or when refused before one was resolved).
  project_id     text,
  timestamp      timestamptz NOT NULL,
  method         text NOT NULL,
  path           text NOT NULL,
  route          text NOT NULL,
  service        text NOT NULL,
  resource_id    text,
  status         integer NOT NULL,
  duration_ms    integer NOT NULL,
  request_id     text NOT NULL,
  auth_strategy  text NOT NULL,
  user_id        text NOT NULL,
  key_name       text NOT NULL,
  client_ip      text NOT NULL,
  domain         text NOT NULL,
  user_agent     text NOT NULL
);
-- Every read is one org's window, newest first; the sweep reads by timestamp alone.
CREATE INDEX audit_logs_org_time ON audit_logs (org_id, timestamp DESC, seq DESC);
CREATE INDEX audit_logs_time ON audit_logs (timestamp);

-- Down Migration

DROP TABLE audit_logs;
