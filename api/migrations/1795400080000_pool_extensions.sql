-- Up Migration

-- The uploaded extensions a pool's browsers load, in load order (position). An extension a
-- pool uses cannot be deleted: DELETE /extensions/{id} answers 409 naming the pools, and
-- the foreign key holds that against a delete racing a pool's create or update. A pool's
-- rows go when the pool is deleted (pools are soft-deleted, so that is done by the API).
CREATE TABLE browser_pool_extensions (
  pool_id       text NOT NULL REFERENCES browser_pools(id) ON DELETE CASCADE,
  extension_id  text NOT NULL REFERENCES extensions(id),
  position      integer NOT NULL,
  PRIMARY KEY (pool_id, extension_id)
);
CREATE INDEX browser_pool_extensions_extension ON browser_pool_extensions (extension_id);

-- Down Migration
DROP TABLE browser_pool_extensions;
