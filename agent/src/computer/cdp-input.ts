import type { BrowserCdp } from '../cdp/client.js';
import type { PageView } from './cdp-page.js';
import { SHIFT, type KeyDefinition } from './cdp-keys.js';
import type { MouseButton } from './checks.js';
import type { Point } from './paths.js';

/**
 * Key and mouse events for one operation on one page, through Input.dispatchKeyEvent
 * and Input.dispatchMouseEvent. The pointer's position and held buttons outlive the
 * operation (PointerState, one per browser); modifiers held by keys live only as long
 * as the operation, as hold_keys and combos release what they press.
 */

export interface PointerState {
  /** Screen coordinates (the window's); undefined until first placed. */
  at: Point | undefined;
  buttons: Set<MouseButton>;
}

/** MouseEvent.buttons bits. */
const BUTTON_BITS: Record<MouseButton, number> = { left: 1, right: 2, middle: 4, back: 8, forward: 16 };
const TEXT_SUPPRESSING = 1 | 2 | 4;

export class InputDriver {
  private modifiers = 0;

  constructor(
    private readonly cdp: BrowserCdp,
    private readonly view: PageView,
    private readonly pointer: PointerState,
  ) {}

  async keyDown(key: KeyDefinition): Promise<void> {
    this.modifiers |= key.modifier ?? 0;
    const shifted = (this.modifiers & SHIFT) !== 0 && key.shiftedText !== undefined;
    const text = shifted ? key.shiftedText : key.text;
    const types = text !== undefined && (this.modifiers & TEXT_SUPPRESSING) === 0;
    await this.cdp.send(
      'Input.dispatchKeyEvent',
      {
        type: types ? 'keyDown' : 'rawKeyDown',
        key: shifted ? key.shiftedText : key.key,
        code: key.code,
        windowsVirtualKeyCode: key.keyCode,
        modifiers: this.modifiers,
        ...(key.location ? { location: key.location } : {}),
        ...(types ? { text, unmodifiedText: text } : {}),
      },
      this.view.sessionId,
    );
  }

  async keyUp(key: KeyDefinition): Promise<void> {
    this.modifiers &= ~(key.modifier ?? 0);
    const shifted = (this.modifiers & SHIFT) !== 0 && key.shiftedText !== undefined;
    await this.cdp.send(
      'Input.dispatchKeyEvent',
      {
        type: 'keyUp',
        key: shifted ? key.shiftedText : key.key,
        code: key.code,
        windowsVirtualKeyCode: key.keyCode,
        modifiers: this.modifiers,
        ...(key.location ? { location: key.location } : {}),
      },
      this.view.sessionId,
    );
  }

  /** Keys pressed in order and released in reverse; a character that needs Shift gets it, as xdotool gives it. */
  async press(keys: KeyDefinition[]): Promise<void> {
    const withShift = keys.flatMap((key) => (key.shifted && (this.modifiers & SHIFT) === 0 ? [SHIFT_KEY, key] : [key]));
    for (const key of withShift) await this.keyDown(key);
    for (const key of [...withShift].reverse()) await this.keyUp(key);
  }

  async insertText(text: string): Promise<void> {
    await this.cdp.send('Input.insertText', { text }, this.view.sessionId);
  }

  async move(to: Point): Promise<void> {
    this.pointer.at = to;
    if (this.onPage(to) || this.pointer.buttons.size > 0) await this.mouse('mouseMoved', to, {});
  }

  /** A press over the band has nothing under it: the page never hears of it, nor of its release. */
  async down(button: MouseButton, clickCount: number): Promise<void> {
    if (!this.onPage(this.at()) && this.pointer.buttons.size === 0) return;
    this.pointer.buttons.add(button);
    await this.mouse('mousePressed', this.at(), { button, clickCount });
  }

  async up(button: MouseButton, clickCount: number): Promise<void> {
    if (!this.pointer.buttons.delete(button)) return;
    await this.mouse('mouseReleased', this.at(), { button, clickCount });
  }

  async wheel(deltaX: number, deltaY: number): Promise<void> {
    if (this.onPage(this.at())) await this.mouse('mouseWheel', this.at(), { deltaX, deltaY });
  }

  private at(): Point {
    return this.pointer.at ?? [0, 0];
  }

  /**
   * Over the band where a headful browser has its toolbar there is no page, so nothing is
   * sent there, unless a button pressed on the page is held: then, as under an X pointer
   * grab, the page keeps getting the pointer's events, at negative coordinates.
   */
  private onPage([x, y]: Point): boolean {
    return x >= this.view.offset.x && y >= this.view.offset.y;
  }

  private async mouse(type: string, [x, y]: Point, extra: Record<string, unknown>): Promise<void> {
    const [px, py] = [x - this.view.offset.x, y - this.view.offset.y];
    let buttons = 0;
    for (const button of this.pointer.buttons) buttons |= BUTTON_BITS[button];
    // A move with a button held names it, as Chromium's own drag events do.
    const [dragging] = this.pointer.buttons;
    const button = type === 'mouseMoved' && dragging ? { button: dragging } : {};
    await this.cdp.send('Input.dispatchMouseEvent', { type, x: px, y: py, modifiers: this.modifiers, buttons, ...button, ...extra }, this.view.sessionId);
  }
}

const SHIFT_KEY: KeyDefinition = { key: 'Shift', code: 'ShiftLeft', keyCode: 16, modifier: SHIFT, location: 1 };
