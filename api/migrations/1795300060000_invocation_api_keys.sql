-- Up Migration

-- The key an app's run gets (KERNEL_API_KEY, issue 21): scoped to the invocation's project
-- and to the invocation itself, so a browser created with it belongs to the invocation, and
-- deleted when the invocation ends. No foreign key: an invocation row outlives nothing here
-- (a key of a deleted project's invocation is already dead with the project).
ALTER TABLE api_keys ADD COLUMN invocation_id text;
CREATE INDEX api_keys_invocation ON api_keys (invocation_id) WHERE invocation_id IS NOT NULL AND deleted_at IS NULL;

-- Down Migration

DROP INDEX api_keys_invocation;
ALTER TABLE api_keys DROP COLUMN invocation_id;
