-- Up Migration

-- A connection an AuthConnection resource applied with kubectl or a GitOps tool manages:
-- the resource as namespace/name. The API refuses to change or delete such a connection
-- (409 auth_connection_managed_by_kubernetes): the tool would put its own settings back.
-- One connection per resource, so a reconcile that raced another finds the row, not a
-- twin. Connections are deleted outright (no deleted_at), so the index needs no filter
-- beyond the column being set.
ALTER TABLE auth_connections ADD COLUMN kubernetes_resource text;
CREATE UNIQUE INDEX auth_connections_kubernetes_resource ON auth_connections (kubernetes_resource)
  WHERE kubernetes_resource IS NOT NULL;

-- Down Migration
DROP INDEX auth_connections_kubernetes_resource;
ALTER TABLE auth_connections DROP COLUMN kubernetes_resource;
