import { describe, expect, it } from 'vitest';
import { generateApiKey, hashApiKey, maskApiKey, KEY_PREFIX } from '../../api/src/modules/api-keys/key-material.js';

describe('API key material', () => {
  it('generates distinct prefixed keys with 256 bits of randomness', () => {
    const keys = new Set(Array.from({ length: 1000 }, generateApiKey));
    expect(keys.size).toBe(1000);
    for (const key of keys) expect(key).toMatch(new RegExp(`^${KEY_PREFIX}[A-Za-z0-9_-]{43}$`));
  });

  it('hashes deterministically and never to the key itself', () => {
    const key = generateApiKey();
    expect(hashApiKey(key).equals(hashApiKey(key))).toBe(true);
    expect(hashApiKey(key)).toHaveLength(32);
    expect(hashApiKey(key).toString('utf8')).not.toContain(key);
    expect(hashApiKey(key + 'x').equals(hashApiKey(key))).toBe(false);
  });

  it('masks all but both ends', () => {
    expect(maskApiKey('bp_abcdefghijklmnopqrstuvwxyz0123456789')).toBe('bp_abcd...6789');
    expect(maskApiKey('customadminkey-0000000000000000000000000001')).toBe('cust...0001');
  });
});
