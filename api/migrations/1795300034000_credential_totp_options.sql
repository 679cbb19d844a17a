-- Up Migration

-- How a credential's TOTP codes are made, as newer SDKs send it (totp_algorithm,
-- totp_digits, totp_period). The defaults are what every existing row was generated
-- with (RFC 6238 as authenticator apps use it), so existing codes do not change.
ALTER TABLE credentials
  ADD COLUMN totp_algorithm text NOT NULL DEFAULT 'SHA1' CHECK (totp_algorithm IN ('SHA1', 'SHA256', 'SHA512')),
  ADD COLUMN totp_digits smallint NOT NULL DEFAULT 6 CHECK (totp_digits BETWEEN 6 AND 8),
  ADD COLUMN totp_period integer NOT NULL DEFAULT 30 CHECK (totp_period BETWEEN 10 AND 300);

-- Down Migration
ALTER TABLE credentials DROP COLUMN totp_algorithm, DROP COLUMN totp_digits, DROP COLUMN totp_period;
