import { describe, expect, it } from 'vitest';
import { keyForCharacter, keyNamed, parseCombo } from '../../agent/src/computer/cdp-keys.js';
import { decodePng } from '../../agent/src/computer/cdp-screenshot.js';
import { encodePng } from '../../agent/src/computer/png.js';

/** xdotool key names as CDP key events, and the screenshot PNG decoder, with no browser. */

describe('xdotool key names as CDP keys', () => {
  it('reads combos with modifier aliases in any case, keysyms as X spells them', () => {
    expect(parseCombo('Ctrl+t').map((key) => [key.key, key.code, key.modifier])).toEqual([
      ['Control', 'ControlLeft', 2],
      ['t', 'KeyT', undefined],
    ]);
    expect(parseCombo('ctrl+shift+Left').map((key) => key.code)).toEqual(['ControlLeft', 'ShiftLeft', 'ArrowLeft']);
    expect(keyNamed('Return')).toMatchObject({ key: 'Enter', keyCode: 13, text: '\r' });
    expect(keyNamed('BackSpace')).toMatchObject({ key: 'Backspace', keyCode: 8 });
    expect(keyNamed('F12')).toMatchObject({ key: 'F12', code: 'F12', keyCode: 123 });
    expect(keyNamed('Page_Down')).toEqual(keyNamed('Next'));
    expect(keyNamed('Control_R')).toMatchObject({ code: 'ControlRight', location: 2 });
    expect(keyNamed('comma')).toMatchObject({ key: ',', code: 'Comma' });
    expect(parseCombo('+').map((key) => key.key)).toEqual(['+']);
  });

  it('gives shifted characters their key and Shift, and other characters by U+hex', () => {
    expect(keyNamed('A')).toMatchObject({ key: 'A', code: 'KeyA', shifted: true });
    expect(keyForCharacter('?')).toMatchObject({ code: 'Slash', keyCode: 191, shifted: true });
    expect(keyForCharacter('a')).toMatchObject({ text: 'a', shiftedText: 'A' });
    expect(keyForCharacter('\n')).toMatchObject({ key: 'Enter' });
    expect(keyForCharacter('é')).toBeUndefined();
    expect(keyNamed('U00E9')).toMatchObject({ key: 'é', text: 'é' });
  });

  it('refuses names X does not know, as xdotool does', () => {
    for (const name of ['return', 'enter', 'esc', 'NoSuchKey', 'é', 'UD800']) expect(() => keyNamed(name), name).toThrow(/unknown key name/);
    expect(() => parseCombo('ctrl+')).toThrow(/empty key name/);
  });
});

describe('the screenshot decoder', () => {
  it('reads back what the encoder wrote', () => {
    const rgb = Buffer.from(Array.from({ length: 4 * 3 * 3 }, (_, index) => (index * 37) & 0xff));
    const decoded = decodePng(encodePng({ width: 4, height: 3, rgb }));
    expect([decoded.width, decoded.height]).toEqual([4, 3]);
    expect(decoded.rgb.equals(rgb)).toBe(true);
  });

  it('refuses what is not a PNG', () => {
    expect(() => decodePng(Buffer.from('GIF89a'))).toThrow(/not a PNG/);
  });
});
