-- Up Migration

-- A pool a BrowserPool resource applied with kubectl or a GitOps tool manages: the
-- resource as namespace/name. The API refuses to change or delete such a pool (409
-- pool_managed_by_kubernetes): the tool would put its own configuration back. One live
-- pool per resource, so a reconcile that raced another finds the row, not a twin.
ALTER TABLE browser_pools ADD COLUMN kubernetes_resource text;
-- Set when the resource is deleted: the pool warms and leases nothing more, and the row
-- goes once its last leased browser is released.
ALTER TABLE browser_pools ADD COLUMN draining_since timestamptz;
CREATE UNIQUE INDEX browser_pools_kubernetes_resource_live ON browser_pools (kubernetes_resource)
  WHERE kubernetes_resource IS NOT NULL AND deleted_at IS NULL;

-- Down Migration
DROP INDEX browser_pools_kubernetes_resource_live;
ALTER TABLE browser_pools DROP COLUMN draining_since;
ALTER TABLE browser_pools DROP COLUMN kubernetes_resource;
