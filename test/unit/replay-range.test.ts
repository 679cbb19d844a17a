import { describe, expect, it } from 'vitest';
import { parseRange } from '../../api/src/modules/replays/video-response.js';

/** The Range header of a replay download or view, read against a video of 1000 bytes. */

describe('parseRange', () => {
  it.each([
    [undefined, 'whole'],
    ['bytes=0-99', { start: 0, end: 99 }],
    ['bytes=500-', { start: 500, end: 999 }],
    ['bytes=900-5000', { start: 900, end: 999 }],
    ['bytes=-100', { start: 900, end: 999 }],
    ['bytes=-5000', { start: 0, end: 999 }],
    ['bytes=999-999', { start: 999, end: 999 }],
  ] as const)('%s → %j', (header, expected) => {
    expect(parseRange(header, 1000)).toEqual(expected);
  });

  it.each(['bytes=1000-', 'bytes=1000-1001', 'bytes=50-10', 'bytes=-0'])('%s is unsatisfiable', (header) => {
    expect(parseRange(header, 1000)).toBe('unsatisfiable');
  });

  it.each(['bytes=0-1,5-9', 'items=0-9', 'bytes=a-b', 'bytes=-', ''])('%j is answered with the whole video', (header) => {
    expect(parseRange(header, 1000)).toBe('whole');
  });

  it('finds nothing to send in an empty video but the whole of it', () => {
    expect(parseRange('bytes=0-', 0)).toBe('unsatisfiable');
    expect(parseRange(undefined, 0)).toBe('whole');
  });
});
