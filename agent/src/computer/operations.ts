import type { ChildProcess } from 'node:child_process';
import type { XDisplay } from '../display.js';
import { crop, decodeXwd, encodePng, type Region } from './png.js';
import { bezierPath, linearPath, seconds, walk, type Point } from './paths.js';
import { badRequest, runForking, runTool, spawnDaemon, xdotool } from './x11-tools.js';

/**
 * Every computer operation of the Kernel contract (CONTRACT.md §2.3) on one display.
 * The API validates bodies with zod; the checks here keep a direct caller of the agent
 * from passing garbage to xdotool, and bound coordinates by the actual screen.
 */

export type Body = Record<string, unknown>;
export type OperationResult = { kind: 'none' } | { kind: 'json'; body: unknown } | { kind: 'png'; png: Buffer };

const NONE: OperationResult = { kind: 'none' };
const BUTTONS: Record<string, string> = { left: '1', middle: '2', right: '3', back: '8', forward: '9' };
const DEFAULT_TYPE_DELAY_MS = 12;
const DEFAULT_SMOOTH_MS = 500;
const DEFAULT_STEPS_PER_SEGMENT = 10;
const DEFAULT_STEP_DELAY_MS = 50;
const MAX_DURATION_MS = 60_000;
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

const number = (body: Body, field: string, fallback?: number): number => {
  const value = body[field] ?? fallback;
  if (typeof value !== 'number' || !Number.isFinite(value)) throw badRequest(`${field} must be a number`);
  return value;
};
const duration = (body: Body, field: string, fallback: number) => Math.min(Math.max(0, number(body, field, fallback)), MAX_DURATION_MS);
const strings = (body: Body, field: string): string[] => {
  const value = body[field] ?? [];
  if (!Array.isArray(value) || !value.every((item) => typeof item === 'string' && item.length > 0 && !/\s/.test(item))) {
    throw badRequest(`${field} must be an array of key names`);
  }
  return value as string[];
};

function point(display: XDisplay, x: unknown, y: unknown, field = 'x, y'): Point {
  if (typeof x !== 'number' || typeof y !== 'number' || !Number.isFinite(x) || !Number.isFinite(y)) throw badRequest(`${field} must be numbers`);
  const [px, py] = [Math.round(x), Math.round(y)];
  if (px < 0 || py < 0 || px >= display.width || py >= display.height) {
    throw badRequest(`${field} (${px}, ${py}) is outside the display (${display.width}x${display.height})`);
  }
  return [px, py];
}

/** hold_keys pressed before the action and released after it, in reverse order. */
function holding(body: Body, commands: string[]): string[] {
  const keys = strings(body, 'hold_keys');
  return [...keys.flatMap((key) => ['keydown', key]), ...commands, ...keys.reverse().flatMap((key) => ['keyup', key])];
}

function button(body: Body, allowed: string[]): string {
  const name = body.button ?? 'left';
  if (typeof name !== 'string' || !allowed.includes(name)) throw badRequest(`button must be one of ${allowed.join(', ')}`);
  return BUTTONS[name]!;
}

export class Computer {
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
    if (typeof body.text !== 'string') throw badRequest('text must be a string');
    // xdotool sleeps half its --delay after each press and half after each release, so
    // each keystroke takes about --delay / 2 (measured: 10 characters at --delay 100 take
    // 598 ms); doubling it makes `delay` the time from one keystroke to the next.
    const delay = Math.round(duration(body, 'delay', DEFAULT_TYPE_DELAY_MS));
    for (const segment of keymapSegments(body.text)) {
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
    const b = button(body, Object.keys(BUTTONS));
    const clicks = Math.round(number(body, 'num_clicks', 1));
    if (clicks < 1 || clicks > 100) throw badRequest('num_clicks must be 1..100');
    const type = body.click_type ?? 'click';
    const action = type === 'down' ? ['mousedown', b] : type === 'up' ? ['mouseup', b] : type === 'click' ? ['click', '--repeat', String(clicks), b] : undefined;
    if (!action) throw badRequest('click_type must be one of down, up, click');
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
    const raw = body.path;
    if (!Array.isArray(raw) || raw.length < 2) throw badRequest('path must hold at least two [x, y] points');
    const points = raw.map((pair: unknown, index) => {
      if (!Array.isArray(pair) || pair.length !== 2) throw badRequest(`path[${index}] must be an [x, y] pair`);
      return point(this.display, pair[0], pair[1], `path[${index}]`);
    });
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
        const steps = Math.round(number(body, 'steps_per_segment', DEFAULT_STEPS_PER_SEGMENT));
        if (steps < 1 || steps > 1000) throw badRequest('steps_per_segment must be 1..1000');
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
    const dx = Math.round(number(body, 'delta_x', 0));
    const dy = Math.round(number(body, 'delta_y', 0));
    if (Math.abs(dx) > 1000 || Math.abs(dy) > 1000) throw badRequest('delta_x and delta_y must be within -1000..1000');
    const wheel = (count: number, positive: string, negative: string) => (count === 0 ? [] : ['click', '--repeat', String(Math.abs(count)), '--delay', '20', count > 0 ? positive : negative]);
    await xdotool(this.display, holding(body, ['mousemove', String(x), String(y), ...wheel(dy, '5', '4'), ...wheel(dx, '7', '6')]));
    return NONE;
  }

  async screenshot(body: Body): Promise<OperationResult> {
    const { stdout } = await runTool(this.display, 'xwd', ['-root', '-silent', '-display', this.display.name]);
    const image = decodeXwd(stdout);
    const region = body.region === undefined || body.region === null ? undefined : this.region(body.region);
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
    if (typeof body.hidden !== 'boolean') throw badRequest('hidden must be a boolean');
    if (body.hidden && !this.cursorHider) {
      const radius = String(Math.max(this.display.width, this.display.height) * 2);
      this.cursorHider = spawnDaemon(this.display, 'unclutter', ['--start-hidden', '--timeout', '1', '--jitter', radius, '--ignore-scrolling', '--ignore-buttons', '1,2,3,4,5,6,7,8,9']);
      this.cursorHider.once('exit', () => (this.cursorHider = undefined));
    } else if (!body.hidden && this.cursorHider) {
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
    if (typeof body.text !== 'string') throw badRequest('text must be a string');
    await runForking(this.display, 'xclip', ['-selection', 'clipboard', '-i'], body.text);
    return NONE;
  }

  private async pointer(): Promise<Point> {
    const shell = await xdotool(this.display, ['getmouselocation', '--shell']);
    const value = (name: string) => Number(new RegExp(`^${name}=(-?\\d+)$`, 'm').exec(shell)?.[1] ?? Number.NaN);
    return [value('X'), value('Y')];
  }

  private region(raw: unknown): Region {
    const r = raw as Record<string, unknown>;
    const fields = ['x', 'y', 'width', 'height'] as const;
    if (typeof raw !== 'object' || !fields.every((field) => Number.isInteger(r[field]) && (r[field] as number) >= 0)) {
      throw badRequest('region must have integer x, y, width and height, none negative');
    }
    const region = Object.fromEntries(fields.map((field) => [field, r[field] as number])) as unknown as Region;
    if (region.width === 0 || region.height === 0 || region.x + region.width > this.display.width || region.y + region.height > this.display.height) {
      throw badRequest(`region must be non-empty and inside the display (${this.display.width}x${this.display.height})`);
    }
    return region;
  }
}
