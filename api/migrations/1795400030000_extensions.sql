-- Up Migration

-- Browser extensions uploaded to a project: the zip itself is the row's (bytea, at most
-- BROWSERPLANE_EXTENSION_MAX_ZIP_MB), loaded into browsers created with the extension.
CREATE TABLE extensions (
  id            text PRIMARY KEY,
  org_id        text NOT NULL REFERENCES orgs(id),
  project_id    text NOT NULL REFERENCES projects(id),
  -- Optional; unique per project under the case- and accent-folded name_key.
  name          text,
  name_key      text,
  seq           bigint GENERATED ALWAYS AS IDENTITY,
  created_at    timestamptz NOT NULL,
  last_used_at  timestamptz,
  size_bytes    bigint NOT NULL,
  -- SHA-256 of the exact bytes uploaded, lowercase hex; null for a Chrome Web Store repackage.
  checksum      text,
  -- From manifest.json, for logs and docs; never used to find the extension.
  manifest_name    text NOT NULL,
  manifest_version text NOT NULL,
  archive       bytea NOT NULL,
  CHECK ((name IS NULL) = (name_key IS NULL))
);
CREATE UNIQUE INDEX extensions_project_name_key ON extensions (project_id, name_key) WHERE name_key IS NOT NULL;
CREATE INDEX extensions_project_created ON extensions (org_id, project_id, created_at DESC, seq DESC);

-- Down Migration
DROP TABLE extensions;
