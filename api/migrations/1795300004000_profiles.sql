-- Up Migration

-- Browser profiles: the row is the API object; the files live behind the ProfileStore
-- port (a directory under the data dir in embedded mode).
CREATE TABLE profiles (
  id            text PRIMARY KEY,
  org_id        text NOT NULL REFERENCES orgs(id),
  project_id    text NOT NULL REFERENCES projects(id),
  -- Optional; unique per project under the case- and accent-folded name_key.
  name          text,
  name_key      text,
  -- Creation order: breaks ties between rows created in the same millisecond.
  seq              bigint GENERATED ALWAYS AS IDENTITY,
  created_at    timestamptz NOT NULL,
  updated_at    timestamptz NOT NULL,
  -- Set by browser sessions that use the profile.
  last_used_at  timestamptz,
  -- Soft delete: the stored files are removed at once; the row keeps past sessions' references resolvable.
  deleted_at    timestamptz,
  CHECK ((name IS NULL) = (name_key IS NULL))
);
CREATE UNIQUE INDEX profiles_project_name_key_live ON profiles (project_id, name_key)
  WHERE name_key IS NOT NULL AND deleted_at IS NULL;
CREATE INDEX profiles_project_created_live ON profiles (org_id, project_id, created_at DESC, seq DESC)
  WHERE deleted_at IS NULL;

-- Down Migration
DROP TABLE profiles;
