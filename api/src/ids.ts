import { randomBytes } from 'node:crypto';

const BASE32 = 'abcdefghijklmnopqrstuvwxyz234567';

/** Lower-case base32 of `bytes` random bytes: URL-safe, case-insensitive, no look-alike punctuation. */
export function randomBase32(bytes: number): string {
  const buf = randomBytes(bytes);
  let bits = 0;
  let value = 0;
  let out = '';
  for (const byte of buf) {
    value = (value << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      out += BASE32[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  if (bits > 0) out += BASE32[(value << (5 - bits)) & 31];
  return out;
}

/** A resource id such as `proj_3kq…`: the prefix tells a reader what it names. */
export function newId(prefix: string): string {
  return `${prefix}_${randomBase32(15)}`;
}

/**
 * The form of a name used for uniqueness and lookups: case- and accent-insensitive,
 * so "Équipe" and "equipe" are the same project name.
 */
export function foldName(name: string): string {
  return name.normalize('NFKD').replace(/\p{M}+/gu, '').toLowerCase();
}
