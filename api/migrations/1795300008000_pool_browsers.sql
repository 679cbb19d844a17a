-- Up Migration

-- The browsers of a pool are browser_sessions rows with pool_id set: they hold slots under
-- the same caps, the same reaper watches them, and a lease is a change of this one row,
-- so "no browser is leased twice" is a property of one UPDATE.
ALTER TABLE browser_sessions
  ADD COLUMN pool_id text REFERENCES browser_pools(id),
  -- The pool's generation the browser was made with: older ones are rebuilt, not reused.
  ADD COLUMN pool_generation integer,
  -- Set while a client holds the browser; NULL while it waits in the pool.
  ADD COLUMN leased_at timestamptz,
  -- Bumped by every lease; the CDP token names it, so a released lease's URL stops working.
  ADD COLUMN lease_seq integer NOT NULL DEFAULT 0,
  ADD CHECK ((pool_id IS NULL) = (pool_generation IS NULL)),
  ADD CHECK (leased_at IS NULL OR pool_id IS NOT NULL);

-- Acquire takes the oldest ready idle browser of the pool.
CREATE INDEX browser_sessions_pool_idle ON browser_sessions (pool_id, started_at)
  WHERE deleted_at IS NULL AND leased_at IS NULL AND phase = 'running';
CREATE INDEX browser_sessions_pool_live ON browser_sessions (pool_id) WHERE deleted_at IS NULL;

-- The fill rate across replicas: a warm browser may start no earlier than this.
ALTER TABLE browser_pools ADD COLUMN next_fill_at timestamptz;

-- Down Migration
ALTER TABLE browser_pools DROP COLUMN next_fill_at;
DROP INDEX browser_sessions_pool_live;
DROP INDEX browser_sessions_pool_idle;
ALTER TABLE browser_sessions DROP COLUMN lease_seq, DROP COLUMN leased_at, DROP COLUMN pool_generation, DROP COLUMN pool_id;
