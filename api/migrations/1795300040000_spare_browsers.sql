-- Up Migration

-- Warm spares (issue 20): browsers the service starts ahead of creates, for the launch
-- configurations a project asks for. A spare is a browser_sessions row with spare_key set
-- (the hash of its launch-relevant settings): nobody's session, invisible to every listing
-- and count, until a create with the same settings claims it in one UPDATE that clears
-- spare_key and writes the create's own fields. An ended spare keeps its key, so it never
-- shows up as a session.
ALTER TABLE browser_sessions ADD COLUMN spare_key text;

-- The claim: a live, running spare of the project with this key, oldest first.
CREATE INDEX browser_sessions_spares ON browser_sessions (project_id, spare_key, started_at)
  WHERE spare_key IS NOT NULL AND deleted_at IS NULL;

-- What the spares learn from: a project's creates of the last minutes.
CREATE INDEX browser_sessions_recent_creates ON browser_sessions (created_at)
  WHERE pool_id IS NULL AND spare_key IS NULL;

-- Down Migration
DROP INDEX browser_sessions_recent_creates;
DROP INDEX browser_sessions_spares;
ALTER TABLE browser_sessions DROP COLUMN spare_key;
