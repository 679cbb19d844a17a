-- Up Migration

-- Lists are newest first; rows created in the same millisecond are ordered by creation
-- order instead of by their random ids, so pages are stable and tests deterministic.
ALTER TABLE projects ADD COLUMN seq bigint GENERATED ALWAYS AS IDENTITY;
ALTER TABLE api_keys ADD COLUMN seq bigint GENERATED ALWAYS AS IDENTITY;
DROP INDEX projects_org_created;
CREATE INDEX projects_org_created ON projects (org_id, created_at DESC, seq DESC);
DROP INDEX api_keys_org_created;
CREATE INDEX api_keys_org_created ON api_keys (org_id, created_at DESC, seq DESC);

-- Down Migration
DROP INDEX api_keys_org_created;
CREATE INDEX api_keys_org_created ON api_keys (org_id, created_at DESC, id DESC);
DROP INDEX projects_org_created;
CREATE INDEX projects_org_created ON projects (org_id, created_at DESC, id DESC);
ALTER TABLE api_keys DROP COLUMN seq;
ALTER TABLE projects DROP COLUMN seq;
