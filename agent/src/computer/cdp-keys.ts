import { badRequest } from './x11-tools.js';

/**
 * xdotool's key names (X keysyms, its lower-case modifier aliases, `a+b` combos) as the
 * key events Input.dispatchKeyEvent takes, on a US layout as the headful Xvfb has it.
 * Names are case-sensitive like X keysyms (`Return`, not `return`), except the
 * modifier aliases xdotool also takes in any case (`ctrl`, `Ctrl`, `CTRL`).
 */

export interface KeyDefinition {
  key: string;
  code: string;
  keyCode: number;
  /** What the key types without Ctrl, Alt or Meta held. */
  text?: string;
  /** The CDP modifier bit a modifier key sets (Alt 1, Ctrl 2, Meta 4, Shift 8). */
  modifier?: number;
  /** 1 left, 2 right, 3 keypad (KeyboardEvent.location). */
  location?: number;
  /** The character needs Shift on a US keyboard, so Shift is pressed around it (as xdotool does). */
  shifted?: boolean;
  /** What the key types with Shift held (`a` types `A`). */
  shiftedText?: string;
}

export const SHIFT = 8;
const MODIFIERS: Record<string, KeyDefinition> = {
  shift: { key: 'Shift', code: 'ShiftLeft', keyCode: 16, modifier: SHIFT, location: 1 },
  ctrl: { key: 'Control', code: 'ControlLeft', keyCode: 17, modifier: 2, location: 1 },
  control: { key: 'Control', code: 'ControlLeft', keyCode: 17, modifier: 2, location: 1 },
  alt: { key: 'Alt', code: 'AltLeft', keyCode: 18, modifier: 1, location: 1 },
  meta: { key: 'Meta', code: 'MetaLeft', keyCode: 91, modifier: 4, location: 1 },
  super: { key: 'Meta', code: 'MetaLeft', keyCode: 91, modifier: 4, location: 1 },
};

const side = (base: KeyDefinition, right: boolean): KeyDefinition =>
  right ? { ...base, code: base.code.replace('Left', 'Right'), location: 2 } : base;

const NAMED: Record<string, KeyDefinition> = {
  Shift_L: MODIFIERS.shift!,
  Shift_R: side(MODIFIERS.shift!, true),
  Control_L: MODIFIERS.ctrl!,
  Control_R: side(MODIFIERS.ctrl!, true),
  Alt_L: MODIFIERS.alt!,
  Alt_R: side(MODIFIERS.alt!, true),
  Meta_L: MODIFIERS.meta!,
  Meta_R: side(MODIFIERS.meta!, true),
  Super_L: MODIFIERS.meta!,
  Super_R: side(MODIFIERS.meta!, true),
  Return: { key: 'Enter', code: 'Enter', keyCode: 13, text: '\r' },
  KP_Enter: { key: 'Enter', code: 'NumpadEnter', keyCode: 13, text: '\r', location: 3 },
  BackSpace: { key: 'Backspace', code: 'Backspace', keyCode: 8 },
  Tab: { key: 'Tab', code: 'Tab', keyCode: 9 },
  Escape: { key: 'Escape', code: 'Escape', keyCode: 27 },
  Delete: { key: 'Delete', code: 'Delete', keyCode: 46 },
  Insert: { key: 'Insert', code: 'Insert', keyCode: 45 },
  Home: { key: 'Home', code: 'Home', keyCode: 36 },
  End: { key: 'End', code: 'End', keyCode: 35 },
  Prior: { key: 'PageUp', code: 'PageUp', keyCode: 33 },
  Page_Up: { key: 'PageUp', code: 'PageUp', keyCode: 33 },
  Next: { key: 'PageDown', code: 'PageDown', keyCode: 34 },
  Page_Down: { key: 'PageDown', code: 'PageDown', keyCode: 34 },
  Left: { key: 'ArrowLeft', code: 'ArrowLeft', keyCode: 37 },
  Up: { key: 'ArrowUp', code: 'ArrowUp', keyCode: 38 },
  Right: { key: 'ArrowRight', code: 'ArrowRight', keyCode: 39 },
  Down: { key: 'ArrowDown', code: 'ArrowDown', keyCode: 40 },
  Menu: { key: 'ContextMenu', code: 'ContextMenu', keyCode: 93 },
  Caps_Lock: { key: 'CapsLock', code: 'CapsLock', keyCode: 20 },
  Num_Lock: { key: 'NumLock', code: 'NumLock', keyCode: 144 },
  Scroll_Lock: { key: 'ScrollLock', code: 'ScrollLock', keyCode: 145 },
  Pause: { key: 'Pause', code: 'Pause', keyCode: 19 },
  Print: { key: 'PrintScreen', code: 'PrintScreen', keyCode: 44 },
  KP_Add: { key: '+', code: 'NumpadAdd', keyCode: 107, text: '+', location: 3 },
  KP_Subtract: { key: '-', code: 'NumpadSubtract', keyCode: 109, text: '-', location: 3 },
  KP_Multiply: { key: '*', code: 'NumpadMultiply', keyCode: 106, text: '*', location: 3 },
  KP_Divide: { key: '/', code: 'NumpadDivide', keyCode: 111, text: '/', location: 3 },
  KP_Decimal: { key: '.', code: 'NumpadDecimal', keyCode: 110, text: '.', location: 3 },
};
for (let n = 1; n <= 24; n++) NAMED[`F${n}`] = { key: `F${n}`, code: `F${n}`, keyCode: 111 + n };
for (let n = 0; n <= 9; n++) NAMED[`KP_${n}`] = { key: String(n), code: `Numpad${n}`, keyCode: 96 + n, text: String(n), location: 3 };

/** Printable ASCII on a US keyboard: the key's code and keyCode, and its shifted character. */
const US_KEYS: [unshifted: string, shifted: string, code: string, keyCode: number][] = [
  ...[...'0123456789'].map((digit, index) => [digit, ')!@#$%^&*('[index]!, `Digit${digit}`, 48 + index] as [string, string, string, number]),
  ...[...'abcdefghijklmnopqrstuvwxyz'].map((letter, index) => [letter, letter.toUpperCase(), `Key${letter.toUpperCase()}`, 65 + index] as [string, string, string, number]),
  ['`', '~', 'Backquote', 192],
  ['-', '_', 'Minus', 189],
  ['=', '+', 'Equal', 187],
  ['[', '{', 'BracketLeft', 219],
  [']', '}', 'BracketRight', 221],
  ['\\', '|', 'Backslash', 220],
  [';', ':', 'Semicolon', 186],
  ["'", '"', 'Quote', 222],
  [',', '<', 'Comma', 188],
  ['.', '>', 'Period', 190],
  ['/', '?', 'Slash', 191],
];
const CHARACTERS = new Map<string, KeyDefinition>([
  [' ', { key: ' ', code: 'Space', keyCode: 32, text: ' ' }],
  ['\n', NAMED.Return!],
  ['\r', NAMED.Return!],
  ['\t', NAMED.Tab!],
]);
for (const [plain, shifted, code, keyCode] of US_KEYS) {
  CHARACTERS.set(plain, { key: plain, code, keyCode, text: plain, shiftedText: shifted });
  CHARACTERS.set(shifted, { key: shifted, code, keyCode, text: shifted, shifted: true });
}

/** X keysym names of the ASCII punctuation (xdotool `key comma`). */
const PUNCTUATION_NAMES: Record<string, string> = {
  space: ' ', exclam: '!', quotedbl: '"', numbersign: '#', dollar: '$', percent: '%', ampersand: '&', apostrophe: "'",
  quoteright: "'", parenleft: '(', parenright: ')', asterisk: '*', plus: '+', comma: ',', minus: '-', period: '.', slash: '/',
  colon: ':', semicolon: ';', less: '<', equal: '=', greater: '>', question: '?', at: '@', bracketleft: '[', backslash: '\\',
  bracketright: ']', asciicircum: '^', underscore: '_', grave: '`', quoteleft: '`', braceleft: '{', bar: '|', braceright: '}',
  asciitilde: '~',
};

/** The key that types `char` on a US keymap; undefined for characters it has no key for. */
export function keyForCharacter(char: string): KeyDefinition | undefined {
  return CHARACTERS.get(char);
}

/** One key name: a modifier alias, a keysym, a keysym of ASCII punctuation, `U+hex` (U00E9), or one character. */
export function keyNamed(name: string): KeyDefinition {
  const found = MODIFIERS[name.toLowerCase()] ?? NAMED[name] ?? CHARACTERS.get(PUNCTUATION_NAMES[name] ?? (name.length === 1 ? name : ''));
  if (found) return found;
  const unicode = /^U([0-9A-Fa-f]{4,6})$/.exec(name);
  const codePoint = unicode ? Number.parseInt(unicode[1]!, 16) : undefined;
  if (codePoint !== undefined && codePoint <= 0x10ffff && !(codePoint >= 0xd800 && codePoint <= 0xdfff)) {
    const char = String.fromCodePoint(codePoint);
    return CHARACTERS.get(char) ?? { key: char, code: '', keyCode: 0, text: char };
  }
  throw badRequest(`unknown key name '${name}' (use X keysym names such as Return, ctrl+t, F5)`);
}

/** `ctrl+shift+Left` as its keys, pressed in order and released in reverse. */
export function parseCombo(combo: string): KeyDefinition[] {
  // A lone '+' is the plus key; otherwise '+' joins keys, as in xdotool.
  if (combo === '+') return [keyNamed('+')];
  const names = combo.split('+');
  if (names.some((name) => name === '')) throw badRequest(`key combination '${combo}' has an empty key name`);
  return names.map(keyNamed);
}
