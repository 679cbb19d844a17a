import { Secret, TOTP } from 'otpauth';

export const TOTP_ALGORITHMS = ['SHA1', 'SHA256', 'SHA512'] as const;
export type TotpAlgorithm = (typeof TOTP_ALGORITHMS)[number];

/** How codes are made; sites that issue other than the defaults say so next to the secret. */
export interface TotpOptions {
  algorithm: TotpAlgorithm;
  digits: number;
  periodSeconds: number;
}

/** RFC 6238 as authenticator apps use it: HMAC-SHA-1, 6 digits, 30-second steps. */
export const DEFAULT_TOTP: TotpOptions = { algorithm: 'SHA1', digits: 6, periodSeconds: 30 };
export const TOTP_PERIOD_SECONDS = DEFAULT_TOTP.periodSeconds;
/** RFC 4226 codes have 6 to 8 digits; the database checks the same bounds. */
export const TOTP_MIN_DIGITS = 6;
export const TOTP_MAX_DIGITS = 8;
/** Shorter steps than 10 s cannot be typed in time; longer than 5 min defeats the point. */
export const TOTP_MIN_PERIOD_SECONDS = 10;
export const TOTP_MAX_PERIOD_SECONDS = 300;

/** Bounds on a normalised secret: 16 characters (80 bits, the shortest sites issue) to 128. */
export const TOTP_SECRET_MIN_CHARS = 16;
export const TOTP_SECRET_MAX_CHARS = 128;

/**
 * The canonical form of a base32 secret as sites display it: without spaces, dashes
 * and `=` padding, in upper case. Invalid characters are left in for the check to find.
 */
export function normaliseTotpSecret(input: string): string {
  return input.replace(/[\s-]+/g, '').replace(/=+$/, '').toUpperCase();
}

/** Why a normalised secret cannot be used, or undefined when it can. Never echoes the secret. */
export function totpSecretProblem(normalised: string): string | undefined {
  if (!/^[A-Z2-7]*$/.test(normalised)) return 'must be base32: letters A to Z and digits 2 to 7 (spaces and dashes are ignored)';
  if (normalised.length < TOTP_SECRET_MIN_CHARS || normalised.length > TOTP_SECRET_MAX_CHARS) {
    return `must be ${TOTP_SECRET_MIN_CHARS} to ${TOTP_SECRET_MAX_CHARS} base32 characters long`;
  }
  return undefined;
}

export interface TotpCode {
  code: string;
  /** The end of the current time step, when the code stops being current. */
  expiresAt: Date;
}

/** The code current at `at` for a normalised base32 secret. */
export function totpCodeAt(secretBase32: string, at: Date, options: TotpOptions = DEFAULT_TOTP): TotpCode {
  const periodMs = options.periodSeconds * 1000;
  const timestamp = at.getTime();
  const code = TOTP.generate({
    secret: Secret.fromBase32(secretBase32),
    algorithm: options.algorithm,
    digits: options.digits,
    period: options.periodSeconds,
    timestamp,
  });
  return { code, expiresAt: new Date((Math.floor(timestamp / periodMs) + 1) * periodMs) };
}
