-- Up Migration

-- Stored login values for automatic re-authentication. Secrets are sealed by the
-- service (AES-256-GCM, associated data `credential:<id>:values` / `credential:<id>:totp`),
-- so neither the values nor the TOTP secret is ever in plaintext here.
CREATE TABLE credentials (
  id                  text PRIMARY KEY,
  org_id              text NOT NULL REFERENCES orgs(id),
  project_id          text NOT NULL REFERENCES projects(id),
  name                text NOT NULL,
  -- Case- and accent-folded name: names are unique per project under this form.
  name_key            text NOT NULL,
  -- Lower-case ASCII host name (IDNs in punycode).
  domain              text NOT NULL,
  sso_provider        text,
  -- Names of the stored values (username, password...): not secret, kept in plaintext
  -- so reads never have to open the sealed values.
  value_keys          text[] NOT NULL,
  -- The values map as one sealed JSON object.
  values_sealed       text NOT NULL,
  totp_secret_sealed  text,
  -- Creation order: breaks ties between rows created in the same millisecond.
  seq              bigint GENERATED ALWAYS AS IDENTITY,
  created_at          timestamptz NOT NULL,
  updated_at          timestamptz NOT NULL
);
-- Deletion is hard (the sealed secrets go with the row), so the index needs no predicate.
CREATE UNIQUE INDEX credentials_project_name_key ON credentials (project_id, name_key);
CREATE INDEX credentials_project_created ON credentials (project_id, created_at DESC, seq DESC);
CREATE INDEX credentials_project_domain ON credentials (project_id, domain);

-- Down Migration
DROP TABLE credentials;
