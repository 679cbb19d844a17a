import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { createSealer, decodeKey } from '../../api/src/crypto/sealer.js';

describe('sealer', () => {
  const sealer = createSealer(randomBytes(32));

  it('opens what it sealed, and seals the same text differently each time', () => {
    const a = sealer.seal('hunter2', 'credential:c1:values');
    const b = sealer.seal('hunter2', 'credential:c1:values');
    expect(a).not.toBe(b);
    expect(a).not.toContain('hunter2');
    expect(sealer.open(a, 'credential:c1:values')).toBe('hunter2');
  });

  it('refuses a value moved to another row or field', () => {
    const sealed = sealer.seal('secret', 'credential:c1:values');
    expect(() => sealer.open(sealed, 'credential:c2:values')).toThrow();
    expect(() => sealer.open(sealed, 'credential:c1:totp')).toThrow();
  });

  it('refuses a tampered value and a value sealed under another key', () => {
    const sealed = sealer.seal('secret', 'ctx');
    const flipped = sealed.slice(0, -2) + (sealed.endsWith('A') ? 'B' : 'A') + sealed.slice(-1);
    expect(() => sealer.open(flipped, 'ctx')).toThrow();
    expect(() => createSealer(randomBytes(32)).open(sealed, 'ctx')).toThrow();
  });

  it('decodes 32-byte keys in hex, base64 and base64url, and nothing else', () => {
    const key = randomBytes(32);
    expect(decodeKey(key.toString('hex'))?.equals(key)).toBe(true);
    expect(decodeKey(key.toString('base64'))?.equals(key)).toBe(true);
    expect(decodeKey(key.toString('base64url'))?.equals(key)).toBe(true);
    expect(decodeKey(randomBytes(16).toString('base64'))).toBeUndefined();
    expect(() => createSealer(randomBytes(16))).toThrow(/32 bytes/);
  });
});
