-- Up Migration

-- External credential providers of an org (1Password Connect). The provider's token is
-- sealed by the service (AES-256-GCM, associated data `credential-provider:<id>:token`),
-- never stored in plaintext. Nothing a provider returns (items, usernames, passwords,
-- TOTP secrets) is ever written here: it is fetched at login time and cached, if at all,
-- in the memory of one replica for at most cache_ttl_seconds.
CREATE TABLE credential_providers (
  id                 text PRIMARY KEY,
  org_id             text NOT NULL REFERENCES orgs(id),
  name               text NOT NULL,
  -- Case- and accent-folded name: names are unique per org under this form.
  name_key           text NOT NULL,
  provider_type      text NOT NULL CHECK (provider_type IN ('onepassword')),
  -- Base URL of the 1Password Connect server (http or https), without /v1.
  connect_url        text NOT NULL,
  token_sealed       text NOT NULL,
  cache_ttl_seconds  integer NOT NULL CHECK (cache_ttl_seconds BETWEEN 0 AND 86400),
  enabled            boolean NOT NULL,
  priority           integer NOT NULL,
  seq                bigint GENERATED ALWAYS AS IDENTITY,
  created_at         timestamptz NOT NULL,
  updated_at         timestamptz NOT NULL
);
CREATE UNIQUE INDEX credential_providers_org_name_key ON credential_providers (org_id, name_key);
CREATE INDEX credential_providers_org_created ON credential_providers (org_id, created_at DESC, seq DESC);

-- Down Migration
DROP TABLE credential_providers;
