-- Up Migration

-- API replicas cache the answer to "which key is this, in which org and project" so an
-- authenticated request needs no round trip for it. Any write that can change that answer
-- (a key deleted, expired early or renamed; a project renamed, deleted or made default; an
-- org changed) notifies every replica, which drops its cache at once. A trigger rather than
-- a NOTIFY beside each write, so no write path (a future one, or a manual UPDATE) can forget
-- it. Statement-level: one notification per statement whatever the rows, and NOTIFY is
-- transactional, so replicas hear of a change only once it is committed.
CREATE FUNCTION browserplane_auth_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('bp:auth:changed', TG_TABLE_NAME);
  RETURN NULL;
END
$$;

CREATE TRIGGER api_keys_auth_changed AFTER UPDATE OR DELETE OR TRUNCATE ON api_keys
  FOR EACH STATEMENT EXECUTE FUNCTION browserplane_auth_changed();
CREATE TRIGGER projects_auth_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON projects
  FOR EACH STATEMENT EXECUTE FUNCTION browserplane_auth_changed();
CREATE TRIGGER orgs_auth_changed AFTER UPDATE OR DELETE OR TRUNCATE ON orgs
  FOR EACH STATEMENT EXECUTE FUNCTION browserplane_auth_changed();

-- Down Migration
DROP TRIGGER orgs_auth_changed ON orgs;
DROP TRIGGER projects_auth_changed ON projects;
DROP TRIGGER api_keys_auth_changed ON api_keys;
DROP FUNCTION browserplane_auth_changed();
