-- Up Migration

-- The app runtime in Kubernetes mode (docs/apps.md, "Kubernetes mode"): build and run
-- Jobs talk to the API with a token of their own, and the sources and built bundles live
-- here, where every API replica can serve them (no ReadWriteMany volume needed).

-- A Job's token: hashed (sha256), scoped to one subject (a deployment's build or an
-- invocation's run), dead at expires_at or once the Job reported its result. A git
-- deployment's token (for the build pod's fetch) is sealed with the service's key.
CREATE TABLE app_job_tokens (
  token_hash        text PRIMARY KEY,
  kind              text NOT NULL CHECK (kind IN ('build', 'run')),
  subject_id        text NOT NULL,
  org_id            text NOT NULL REFERENCES orgs(id),
  project_id        text NOT NULL REFERENCES projects(id),
  git_token_sealed  text,
  created_at        timestamptz NOT NULL,
  expires_at        timestamptz NOT NULL,
  revoked_at        timestamptz
);
CREATE INDEX app_job_tokens_subject ON app_job_tokens (kind, subject_id);

-- Bytes of a deployment in chunks (a source upload, a built bundle), so neither side holds
-- a whole one in memory; deleted with the deployment's end (failed, deleted).
CREATE TABLE app_blobs (
  deployment_id  text NOT NULL REFERENCES deployments(id) ON DELETE CASCADE,
  kind           text NOT NULL CHECK (kind IN ('source', 'bundle')),
  seq            integer NOT NULL,
  data           bytea NOT NULL,
  PRIMARY KEY (deployment_id, kind, seq)
);

-- Down Migration

DROP TABLE app_blobs;
DROP TABLE app_job_tokens;
