import type { ChildProcess } from 'node:child_process';
import type { XDisplay } from '../display.js';
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
  type MouseButton,
  type OperationResult,
} from './checks.js';
import { crop, decodeXwd, encodePng } from './png.js';
import { bezierPath, linearPath, seconds, walk, type Point } from './paths.js';
import { badRequest, runForking, runTool, spawnDaemon, xdotool } from './x11-tools.js';

/** Every computer operation of the Kernel contract (CONTRACT.md §2.3) on one X display. */

export type { Body, OperationResult } from './checks.js';

const X_BUTTONS: Record<MouseButton, string> = { left: '1', middle: '2', right: '3', back: '8', forward: '9' };
const UNICODE_SETTLE_MS = 30;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Runs of characters a US keymap has (printable ASCII, tab, newline), and each other character alone. */
export function keymapSegments(text: string): { text: string; inKeymap: boolean }[] {
  const segments: { text: string; inKeymap: boolean }[] = [];
  for (const char of text) {
    const inKeymap = /^[\x20-\x7e\t\n]$/.test(char);
    const last = segments.at(-1);
    if (inKeymap && last?.inKeymap) last.text += char;
    else segments.push({ text: char, inKeymap });
  }
  return segments;
}

/** hold_keys pressed before the action and released after it, in reverse order. */
function holding(body: Body, commands: string[]): string[] {
  const keys = strings(body, 'hold_keys');
  return [...keys.flatMap((key) => ['keydown', key]), ...commands, ...keys.reverse().flatMap((key) => ['keyup', key])];
}

const button = (body: Body, allowed: readonly MouseButton[]) => X_BUTTONS[mouseButton(body, allowed)];

export class Computer implements ComputerOperations {
  private cursorHider?: ChildProcess;
  private spareKeycodes?: number[];
  private nextSpare = 0;

  constructor(readonly display: XDisplay) {}

  /**
   * Characters outside the keymap (most of Unicode) need a keycode mapped to them.
   * xdotool maps a scratch keycode just before each press and unmaps it right after, and
   * Chromium, which reloads its keymap asynchronously, then drops some of them (measured:
   * one character in three runs of "✓ 日本語"). So each such character gets a spare keycode
   * of its own through xmodmap, the mapping is given time to reach Chromium, and only then
   * does xdotool press that keycode; mappings stay until the spare is reused.
   */
  async typeText(body: Body): Promise<OperationResult> {
    const typed = text(body);
    // xdotool sleeps half its --delay after each press and half after each release, so
    // each keystroke takes about --delay / 2 (measured: 10 characters at --delay 100 take
    // 598 ms); doubling it makes `delay` the time from one keystroke to the next.
    const delay = Math.round(duration(body, 'delay', DEFAULT_TYPE_DELAY_MS));
    for (const segment of keymapSegments(typed)) {
      if (segment.inKeymap) await xdotool(this.display, ['type', '--delay', String(delay * 2), '--', segment.text]);
      else await this.typeOutsideKeymap(segment.text, delay);
    }
    return NONE;
  }

  private async typeOutsideKeymap(char: string, delay: number): Promise<void> {
    this.spareKeycodes ??= await this.findSpareKeycodes();
    if (this.spareKeycodes.length === 0) {
      await xdotool(this.display, ['type', '--delay', String(delay * 2), '--', char]);
      return;
    }
    const keycode = this.spareKeycodes[this.nextSpare++ % this.spareKeycodes.length]!;
    const keysym = `U${char.codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}`;
    await runTool(this.display, 'xmodmap', ['-e', `keycode ${keycode} = ${keysym} ${keysym}`]);
    await sleep(Math.max(delay, UNICODE_SETTLE_MS));
    await xdotool(this.display, ['key', keysym]);
  }

  /** Keycodes with no keysym, except the highest, which xdotool takes as its own scratch. */
  private async findSpareKeycodes(): Promise<number[]> {
    const { stdout } = await runTool(this.display, 'xmodmap', ['-pke']).catch(() => ({ stdout: Buffer.alloc(0) }));
    const empty = [...stdout.toString('utf8').matchAll(/^keycode\s+(\d+) =\s*$/gm)].map((match) => Number(match[1]));
    return empty.filter((keycode) => keycode > 8).slice(0, -1);
  }

  async pressKey(body: Body): Promise<OperationResult> {
    const keys = strings(body, 'keys');
    if (keys.length === 0) throw badRequest('keys must name at least one key');
    const hold = duration(body, 'duration', 0);
    const commands = hold > 0 ? [...keys.flatMap((key) => ['keydown', key]), 'sleep', seconds(hold), ...[...keys].reverse().flatMap((key) => ['keyup', key])] : keys.flatMap((key) => ['key', key]);
    await xdotool(this.display, holding(body, commands));
    return NONE;
  }

  async clickMouse(body: Body): Promise<OperationResult> {
    const [x, y] = point(this.display, body.x, body.y);
    const b = button(body, MOUSE_BUTTONS);
    const clicks = clickCount(body);
    const type = clickType(body);
    const action = type === 'down' ? ['mousedown', b] : type === 'up' ? ['mouseup', b] : ['click', '--repeat', String(clicks), b];
    await xdotool(this.display, holding(body, ['mousemove', String(x), String(y), ...action]));
    return NONE;
  }

  async moveMouse(body: Body): Promise<OperationResult> {
    const to = point(this.display, body.x, body.y);
    if (body.smooth !== true) {
      await xdotool(this.display, holding(body, ['mousemove', String(to[0]), String(to[1])]));
      return NONE;
    }
    const from = await this.pointer();
    const total = duration(body, 'duration_ms', DEFAULT_SMOOTH_MS);
    const steps = Math.max(2, Math.min(200, Math.round(total / 16)));
    await xdotool(this.display, holding(body, walk(bezierPath(from, to, steps), total / steps)));
    return NONE;
  }

  async dragMouse(body: Body): Promise<OperationResult> {
    const points = dragPath(this.display, body);
    const b = button(body, ['left', 'middle', 'right']);
    const commands = ['mousemove', String(points[0]![0]), String(points[0]![1]), 'mousedown', b];
    const delay = duration(body, 'delay', 0);
    if (delay > 0) commands.push('sleep', seconds(delay));
    const segments = points.length - 1;
    for (let index = 0; index < segments; index++) {
      const [from, to] = [points[index]!, points[index + 1]!];
      if (body.smooth === true) {
        const segmentMs = duration(body, 'duration_ms', DEFAULT_SMOOTH_MS) / segments;
        const steps = Math.max(2, Math.min(100, Math.round(segmentMs / 16)));
        commands.push(...walk(bezierPath(from, to, steps), segmentMs / steps));
      } else {
        const steps = stepsPerSegment(body);
        commands.push(...walk(linearPath(from, to, steps), duration(body, 'step_delay_ms', DEFAULT_STEP_DELAY_MS)));
      }
    }
    commands.push('mouseup', b);
    await xdotool(this.display, holding(body, commands));
    return NONE;
  }

  /** Deltas count wheel notches (one X button 4/5/6/7 click each), as xdotool and Kernel do. */
  async scroll(body: Body): Promise<OperationResult> {
    const [x, y] = point(this.display, body.x, body.y);
    const { dx, dy } = scrollDeltas(body);
    const wheel = (count: number, positive: string, negative: string) => (count === 0 ? [] : ['click', '--repeat', String(Math.abs(count)), '--delay', '20', count > 0 ? positive : negative]);
    await xdotool(this.display, holding(body, ['mousemove', String(x), String(y), ...wheel(dy, '5', '4'), ...wheel(dx, '7', '6')]));
    return NONE;
  }

  async screenshot(body: Body): Promise<OperationResult> {
    const { stdout } = await runTool(this.display, 'xwd', ['-root', '-silent', '-display', this.display.name]);
    const image = decodeXwd(stdout);
    const region = regionOf(this.display, body.region);
    return { kind: 'png', png: encodePng(region ? crop(image, region) : image) };
  }

  async mousePosition(): Promise<OperationResult> {
    const [x, y] = await this.pointer();
    return { kind: 'json', body: { x, y } };
  }

  /**
   * unclutter-xfixes hides the pointer through XFixes for as long as it stays connected;
   * with a jitter radius larger than the screen, our own moves and clicks do not bring the
   * pointer back. Showing it again is ending that client.
   */
  setCursor(body: Body): OperationResult {
    const hidden = cursorHidden(body);
    if (hidden && !this.cursorHider) {
      const radius = String(Math.max(this.display.width, this.display.height) * 2);
      this.cursorHider = spawnDaemon(this.display, 'unclutter', ['--start-hidden', '--timeout', '1', '--jitter', radius, '--ignore-scrolling', '--ignore-buttons', '1,2,3,4,5,6,7,8,9']);
      this.cursorHider.once('exit', () => (this.cursorHider = undefined));
    } else if (!hidden && this.cursorHider) {
      this.cursorHider.kill('SIGTERM');
      this.cursorHider = undefined;
    }
    return { kind: 'json', body: { ok: true } };
  }

  cursorHidden(): boolean {
    return this.cursorHider !== undefined;
  }

  async readClipboard(): Promise<OperationResult> {
    try {
      const { stdout } = await runTool(this.display, 'xclip', ['-selection', 'clipboard', '-o'], { timeoutMs: 5000 });
      return { kind: 'json', body: { text: stdout.toString('utf8') } };
    } catch (error) {
      // An empty clipboard has no owner to convert it: xclip says so and exits 1.
      if (error instanceof Error && /target .* not available|no owner/i.test(error.message)) return { kind: 'json', body: { text: '' } };
      throw error;
    }
  }

  async writeClipboard(body: Body): Promise<OperationResult> {
    await runForking(this.display, 'xclip', ['-selection', 'clipboard', '-i'], text(body));
    return NONE;
  }

  private async pointer(): Promise<Point> {
    const shell = await xdotool(this.display, ['getmouselocation', '--shell']);
    const value = (name: string) => Number(new RegExp(`^${name}=(-?\\d+)$`, 'm').exec(shell)?.[1] ?? Number.NaN);
    return [value('X'), value('Y')];
  }
}
