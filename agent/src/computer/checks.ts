import type { Point } from './paths.js';
import type { Region } from './png.js';
import { badRequest } from './x11-tools.js';

/**
 * The checks both computers (X display and CDP) apply to a request body. The API
 * validates bodies with zod; these keep a direct caller of the agent from passing
 * garbage on, and bound coordinates by the actual screen.
 */

export type Body = Record<string, unknown>;
export type OperationResult = { kind: 'none' } | { kind: 'json'; body: unknown } | { kind: 'png'; png: Buffer };

/** What coordinates are checked against: the X screen, or a headless browser's window. */
export interface ScreenSize {
  width: number;
  height: number;
}

/** What the routes call, on an X display (operations.ts) or through CDP (cdp-computer.ts). */
export interface ComputerOperations {
  typeText(body: Body): Promise<OperationResult>;
  pressKey(body: Body): Promise<OperationResult>;
  clickMouse(body: Body): Promise<OperationResult>;
  moveMouse(body: Body): Promise<OperationResult>;
  dragMouse(body: Body): Promise<OperationResult>;
  scroll(body: Body): Promise<OperationResult>;
  screenshot(body: Body): Promise<OperationResult>;
  mousePosition(): Promise<OperationResult>;
  setCursor(body: Body): OperationResult;
  readClipboard(): Promise<OperationResult>;
  writeClipboard(body: Body): Promise<OperationResult>;
}

export const NONE: OperationResult = { kind: 'none' };
export const MOUSE_BUTTONS = ['left', 'middle', 'right', 'back', 'forward'] as const;
export type MouseButton = (typeof MOUSE_BUTTONS)[number];
export const DEFAULT_TYPE_DELAY_MS = 12;
export const DEFAULT_SMOOTH_MS = 500;
export const DEFAULT_STEPS_PER_SEGMENT = 10;
export const DEFAULT_STEP_DELAY_MS = 50;
export const MAX_DURATION_MS = 60_000;

export const number = (body: Body, field: string, fallback?: number): number => {
  const value = body[field] ?? fallback;
  if (typeof value !== 'number' || !Number.isFinite(value)) throw badRequest(`${field} must be a number`);
  return value;
};

export const duration = (body: Body, field: string, fallback: number) => Math.min(Math.max(0, number(body, field, fallback)), MAX_DURATION_MS);

export const strings = (body: Body, field: string): string[] => {
  const value = body[field] ?? [];
  if (!Array.isArray(value) || !value.every((item) => typeof item === 'string' && item.length > 0 && !/\s/.test(item))) {
    throw badRequest(`${field} must be an array of key names`);
  }
  return value as string[];
};

export const text = (body: Body): string => {
  if (typeof body.text !== 'string') throw badRequest('text must be a string');
  return body.text;
};

export function point(screen: ScreenSize, x: unknown, y: unknown, field = 'x, y'): Point {
  if (typeof x !== 'number' || typeof y !== 'number' || !Number.isFinite(x) || !Number.isFinite(y)) throw badRequest(`${field} must be numbers`);
  const [px, py] = [Math.round(x), Math.round(y)];
  if (px < 0 || py < 0 || px >= screen.width || py >= screen.height) {
    throw badRequest(`${field} (${px}, ${py}) is outside the display (${screen.width}x${screen.height})`);
  }
  return [px, py];
}

export function mouseButton(body: Body, allowed: readonly MouseButton[]): MouseButton {
  const name = body.button ?? 'left';
  if (typeof name !== 'string' || !allowed.includes(name as MouseButton)) throw badRequest(`button must be one of ${allowed.join(', ')}`);
  return name as MouseButton;
}

export function clickCount(body: Body): number {
  const clicks = Math.round(number(body, 'num_clicks', 1));
  if (clicks < 1 || clicks > 100) throw badRequest('num_clicks must be 1..100');
  return clicks;
}

export function clickType(body: Body): 'down' | 'up' | 'click' {
  const type = body.click_type ?? 'click';
  if (type !== 'down' && type !== 'up' && type !== 'click') throw badRequest('click_type must be one of down, up, click');
  return type;
}

export function dragPath(screen: ScreenSize, body: Body): Point[] {
  const raw = body.path;
  if (!Array.isArray(raw) || raw.length < 2) throw badRequest('path must hold at least two [x, y] points');
  return raw.map((pair: unknown, index) => {
    if (!Array.isArray(pair) || pair.length !== 2) throw badRequest(`path[${index}] must be an [x, y] pair`);
    return point(screen, pair[0], pair[1], `path[${index}]`);
  });
}

export function stepsPerSegment(body: Body): number {
  const steps = Math.round(number(body, 'steps_per_segment', DEFAULT_STEPS_PER_SEGMENT));
  if (steps < 1 || steps > 1000) throw badRequest('steps_per_segment must be 1..1000');
  return steps;
}

/** Wheel notches on each axis. */
export function scrollDeltas(body: Body): { dx: number; dy: number } {
  const dx = Math.round(number(body, 'delta_x', 0));
  const dy = Math.round(number(body, 'delta_y', 0));
  if (Math.abs(dx) > 1000 || Math.abs(dy) > 1000) throw badRequest('delta_x and delta_y must be within -1000..1000');
  return { dx, dy };
}

export function cursorHidden(body: Body): boolean {
  if (typeof body.hidden !== 'boolean') throw badRequest('hidden must be a boolean');
  return body.hidden;
}

/** The screenshot's region, or undefined for the whole screen. */
export function regionOf(screen: ScreenSize, raw: unknown): Region | undefined {
  if (raw === undefined || raw === null) return undefined;
  const r = raw as Record<string, unknown>;
  const fields = ['x', 'y', 'width', 'height'] as const;
  if (typeof raw !== 'object' || !fields.every((field) => Number.isInteger(r[field]) && (r[field] as number) >= 0)) {
    throw badRequest('region must have integer x, y, width and height, none negative');
  }
  const region = Object.fromEntries(fields.map((field) => [field, r[field] as number])) as unknown as Region;
  if (region.width === 0 || region.height === 0 || region.x + region.width > screen.width || region.y + region.height > screen.height) {
    throw badRequest(`region must be non-empty and inside the display (${screen.width}x${screen.height})`);
  }
  return region;
}
