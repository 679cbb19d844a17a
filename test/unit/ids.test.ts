import { describe, expect, it } from 'vitest';
import { foldName, newId, randomBase32 } from '../../api/src/ids.js';

describe('ids and names', () => {
  it('makes prefixed, lower-case base32 ids', () => {
    const ids = new Set(Array.from({ length: 500 }, () => newId('proj')));
    expect(ids.size).toBe(500);
    for (const id of ids) expect(id).toMatch(/^proj_[a-z2-7]{24}$/);
  });

  it('encodes every bit: lengths follow ceil(bytes * 8 / 5)', () => {
    expect(randomBase32(1)).toHaveLength(2);
    expect(randomBase32(5)).toHaveLength(8);
    expect(randomBase32(15)).toHaveLength(24);
  });

  it('folds case and accents so equal-looking names collide', () => {
    expect(foldName('Équipe Ünïcode')).toBe(foldName('equipe unicode'));
    expect(foldName('ＦＵＬＬ')).toBe('full');
    expect(foldName('a')).not.toBe(foldName('b'));
  });
});
