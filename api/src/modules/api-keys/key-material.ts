import { createHash, randomBytes } from 'node:crypto';

/** Every generated key starts with this, so scanners can spot leaked keys. */
export const KEY_PREFIX = 'bp_';

/** A new plaintext key: 256 random bits, base64url. Shown once, never stored. */
export function generateApiKey(): string {
  return KEY_PREFIX + randomBytes(32).toString('base64url');
}

/**
 * SHA-256 of the key. Keys carry 256 bits of entropy, so a fast hash is the right one:
 * a slow password hash would add latency to every request and no security.
 */
export function hashApiKey(plaintext: string): Buffer {
  return createHash('sha256').update(plaintext, 'utf8').digest();
}

/** What a person may see of a key: enough of both ends to tell keys apart. */
export function maskApiKey(plaintext: string): string {
  const head = plaintext.startsWith(KEY_PREFIX) ? plaintext.slice(0, KEY_PREFIX.length + 4) : plaintext.slice(0, 4);
  return `${head}...${plaintext.slice(-4)}`;
}
