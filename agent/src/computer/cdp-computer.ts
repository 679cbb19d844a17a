import type { CdpMux } from '../cdp/mux.js';
import { withBrowserCdp, type BrowserCdp } from '../cdp/client.js';
import { readClipboard, writeClipboard } from './cdp-clipboard.js';
import { InputDriver, type PointerState } from './cdp-input.js';
import { keyForCharacter, parseCombo, type KeyDefinition } from './cdp-keys.js';
import { ActivePage, type PageView } from './cdp-page.js';
import { captureScreen } from './cdp-screenshot.js';
import {
  clickCount,
  clickType,
  cursorHidden,
  DEFAULT_SMOOTH_MS,
  DEFAULT_STEP_DELAY_MS,
  DEFAULT_TYPE_DELAY_MS,
  dragPath,
  duration,
  mouseButton,
  MOUSE_BUTTONS,
  NONE,
  point,
  regionOf,
  scrollDeltas,
  stepsPerSegment,
  strings,
  text,
  type Body,
  type ComputerOperations,
  type OperationResult,
} from './checks.js';
import { bezierPath, linearPath, type Point } from './paths.js';
import { badRequest } from './x11-tools.js';

/**
 * The computer operations of a headless browser, through CDP (a virtual connection of
 * the agent's own for each operation) on the page a user would be looking at
 * (cdp-page.ts), with the headful computer's semantics: the same key names, the same
 * coordinates for the same window size, the same pointer paths and timings.
 */

/**
 * Pixels per wheel notch: one xdotool wheel click (X button 4/5) scrolls a headful
 * Chromium 156 page by 120 pixels (measured through both computers: 1 notch 120, 3
 * notches 360), so each notch is one mouseWheel event of 120.
 */
export const WHEEL_NOTCH_PX = 120;
/** xdotool's --delay between wheel clicks in the headful scroll. */
const WHEEL_CLICK_DELAY_MS = 20;

const sleep = (ms: number) => (ms > 0 ? new Promise((resolve) => setTimeout(resolve, ms)) : Promise.resolve());

export class CdpComputer implements ComputerOperations {
  private readonly pages = new ActivePage();
  private readonly pointer: PointerState = { at: undefined, buttons: new Set() };
  private hidden = false;
  /** One operation at a time, as xdotool's are on one display: their events must not interleave. */
  private queue: Promise<unknown> = Promise.resolve();

  constructor(private readonly mux: CdpMux) {}

  async typeText(body: Body): Promise<OperationResult> {
    const typed = text(body);
    const delay = Math.round(duration(body, 'delay', DEFAULT_TYPE_DELAY_MS));
    return this.onPage(async (input) => {
      let first = true;
      for (const char of typed) {
        if (!first) await sleep(delay);
        first = false;
        const key = keyForCharacter(char);
        if (key) await input.press([key]);
        else await input.insertText(char);
      }
    });
  }

  async pressKey(body: Body): Promise<OperationResult> {
    const combos = strings(body, 'keys').map(parseCombo);
    if (combos.length === 0) throw badRequest('keys must name at least one key');
    const hold = duration(body, 'duration', 0);
    return this.onPage((input) =>
      holding(input, body, async () => {
        if (hold === 0) {
          for (const keys of combos) await input.press(keys);
          return;
        }
        const keys = combos.flat();
        for (const key of keys) await input.keyDown(key);
        await sleep(hold);
        for (const key of [...keys].reverse()) await input.keyUp(key);
      }),
    );
  }

  async clickMouse(body: Body): Promise<OperationResult> {
    const button = mouseButton(body, MOUSE_BUTTONS);
    const clicks = clickCount(body);
    const type = clickType(body);
    return this.onPage(async (input, view) => {
      const at = point(view.screen, body.x, body.y);
      await holding(input, body, async () => {
        await input.move(at);
        if (type !== 'up') await input.down(button, 1);
        if (type !== 'down') await input.up(button, 1);
        // Chromium counts clicks from the clickCount it is told, not from timing.
        for (let count = 2; type === 'click' && count <= clicks; count++) {
          await input.down(button, count);
          await input.up(button, count);
        }
      });
    });
  }

  async moveMouse(body: Body): Promise<OperationResult> {
    const total = duration(body, 'duration_ms', DEFAULT_SMOOTH_MS);
    return this.onPage(async (input, view) => {
      const to = point(view.screen, body.x, body.y);
      await holding(input, body, async () => {
        if (body.smooth !== true) return input.move(to);
        const steps = Math.max(2, Math.min(200, Math.round(total / 16)));
        await walk(input, bezierPath(this.position(view), to, steps), total / steps);
      });
    });
  }

  async dragMouse(body: Body): Promise<OperationResult> {
    const button = mouseButton(body, ['left', 'middle', 'right']);
    const delay = duration(body, 'delay', 0);
    return this.onPage(async (input, view) => {
      const points = dragPath(view.screen, body);
      const segments = points.length - 1;
      const paths: { path: Point[]; stepMs: number }[] = [];
      for (let index = 0; index < segments; index++) {
        const [from, to] = [points[index]!, points[index + 1]!];
        if (body.smooth === true) {
          const segmentMs = duration(body, 'duration_ms', DEFAULT_SMOOTH_MS) / segments;
          const steps = Math.max(2, Math.min(100, Math.round(segmentMs / 16)));
          paths.push({ path: bezierPath(from, to, steps), stepMs: segmentMs / steps });
        } else {
          paths.push({ path: linearPath(from, to, stepsPerSegment(body)), stepMs: duration(body, 'step_delay_ms', DEFAULT_STEP_DELAY_MS) });
        }
      }
      await holding(input, body, async () => {
        await input.move(points[0]!);
        await input.down(button, 1);
        await sleep(delay);
        for (const { path, stepMs } of paths) await walk(input, path, stepMs);
        await input.up(button, 1);
      });
    });
  }

  /** Deltas count wheel notches, as on the headful display: one wheel event of WHEEL_NOTCH_PX each. */
  async scroll(body: Body): Promise<OperationResult> {
    const { dx, dy } = scrollDeltas(body);
    return this.onPage(async (input, view) => {
      const at = point(view.screen, body.x, body.y);
      await holding(input, body, async () => {
        await input.move(at);
        const notches = [...Array<[number, number]>(Math.abs(dy)).fill([0, Math.sign(dy)]), ...Array<[number, number]>(Math.abs(dx)).fill([Math.sign(dx), 0])];
        for (const [index, [x, y]] of notches.entries()) {
          if (index > 0) await sleep(WHEEL_CLICK_DELAY_MS);
          await input.wheel(x * WHEEL_NOTCH_PX, y * WHEEL_NOTCH_PX);
        }
      });
    });
  }

  async screenshot(body: Body): Promise<OperationResult> {
    return this.withPage(async (cdp, view) => ({ kind: 'png', png: await captureScreen(cdp, view, regionOf(view.screen, body.region)) }));
  }

  async mousePosition(): Promise<OperationResult> {
    if (this.pointer.at) return { kind: 'json', body: { x: this.pointer.at[0], y: this.pointer.at[1] } };
    return this.withPage((_cdp, view) => {
      const [x, y] = this.position(view);
      return Promise.resolve({ kind: 'json', body: { x, y } });
    });
  }

  /** Headless Chromium draws no pointer, so there is nothing to hide; the flag is kept for the answer's sake. */
  setCursor(body: Body): OperationResult {
    this.hidden = cursorHidden(body);
    return { kind: 'json', body: { ok: true } };
  }

  cursorHidden(): boolean {
    return this.hidden;
  }

  async readClipboard(): Promise<OperationResult> {
    return this.withPage(async (cdp, view) => ({ kind: 'json', body: { text: await readClipboard(cdp, view) } }));
  }

  async writeClipboard(body: Body): Promise<OperationResult> {
    const written = text(body);
    return this.withPage(async (cdp, view) => {
      await writeClipboard(cdp, view, written);
      return NONE;
    });
  }

  /** Where the pointer is; before anything moved it, the middle of the screen, where an X server starts it. */
  private position(view: PageView): Point {
    return this.pointer.at ?? [Math.floor(view.screen.width / 2), Math.floor(view.screen.height / 2)];
  }

  private onPage(work: (input: InputDriver, view: PageView) => Promise<void>): Promise<OperationResult> {
    return this.withPage(async (cdp, view) => {
      await work(new InputDriver(cdp, view, this.pointer), view);
      return NONE;
    });
  }

  private withPage<T>(work: (cdp: BrowserCdp, view: PageView) => Promise<T>): Promise<T> {
    const run = this.queue.then(() => withBrowserCdp(this.mux, async (cdp) => work(cdp, await this.pages.open(cdp))));
    this.queue = run.catch(() => undefined);
    return run;
  }
}

/** hold_keys pressed before the action and released after it, in reverse order, even when it fails. */
async function holding(input: InputDriver, body: Body, action: () => Promise<void>): Promise<void> {
  const keys: KeyDefinition[] = strings(body, 'hold_keys').flatMap(parseCombo);
  const pressed: KeyDefinition[] = [];
  try {
    for (const key of keys) {
      await input.keyDown(key);
      pressed.push(key);
    }
    await action();
  } finally {
    for (const key of pressed.reverse()) await input.keyUp(key);
  }
}

async function walk(input: InputDriver, path: Point[], stepMs: number): Promise<void> {
  for (const at of path) {
    await input.move(at);
    await sleep(stepMs);
  }
}
