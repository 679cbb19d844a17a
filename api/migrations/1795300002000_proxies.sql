-- Up Migration

-- A proxy configuration of a project. Managed types (datacenter, isp, residential, mobile)
-- are bound at creation to one operator-configured upstream (upstream_key); custom proxies
-- carry their own endpoint, with the password sealed (never stored in plaintext).
CREATE TABLE proxies (
  id               text PRIMARY KEY,
  org_id           text NOT NULL REFERENCES orgs(id),
  project_id       text NOT NULL REFERENCES projects(id),
  name             text NOT NULL,
  -- Case- and accent-folded name, for the exact-name filter. Names are not unique.
  name_key         text NOT NULL,
  type             text NOT NULL CHECK (type IN ('datacenter', 'isp', 'residential', 'mobile', 'custom')),
  protocol         text NOT NULL CHECK (protocol IN ('http', 'https')),
  bypass_hosts     text[] NOT NULL DEFAULT '{}',
  -- Managed types: the requested config (country, city, ...). Custom: host, port, username.
  config           jsonb NOT NULL DEFAULT '{}',
  -- Custom only: searchable host.
  host             text,
  -- Custom only: the password sealed with context proxy:<id>:password.
  password_sealed  text,
  -- Managed only: the name (or scheme://host:port) of the upstream chosen at creation.
  upstream_key     text,
  status           text CHECK (status IN ('available', 'unavailable')),
  last_checked     timestamptz,
  ip_address       text,
  -- Creation order: breaks ties between rows created in the same millisecond.
  seq              bigint GENERATED ALWAYS AS IDENTITY,
  created_at       timestamptz NOT NULL,
  updated_at       timestamptz NOT NULL,
  deleted_at       timestamptz,
  CHECK ((type = 'custom') = (host IS NOT NULL)),
  CHECK ((type = 'custom') = (upstream_key IS NULL))
);
CREATE INDEX proxies_project_created ON proxies (project_id, created_at DESC, seq DESC) WHERE deleted_at IS NULL;

-- Down Migration
DROP TABLE proxies;
