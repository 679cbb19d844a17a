import { z } from 'zod';

/** Bodies of the computer operations, exactly as CONTRACT.md §2.3 (the SDK's types) has them. */

const coordinate = (axis: string) => z.number().min(0).describe(`${axis} coordinate on the display, in pixels`);
const holdKeys = z.array(z.string().min(1)).max(16).optional().describe('X keysyms held down during the action, e.g. ["ctrl"]');
const milliseconds = (what: string) => z.number().min(0).max(60_000).optional().describe(what);

export const typeTextBody = z.strictObject({
  text: z.string().max(100_000).describe('Text typed into the focused element (Unicode allowed)'),
  delay: milliseconds('Milliseconds between keystrokes (default 12)'),
});

export const clickMouseBody = z.strictObject({
  x: coordinate('X'),
  y: coordinate('Y'),
  button: z.enum(['left', 'right', 'middle', 'back', 'forward']).optional().describe('Mouse button (default left)'),
  click_type: z.enum(['down', 'up', 'click']).optional().describe('Press, release, or both (default click)'),
  hold_keys: holdKeys,
  num_clicks: z.number().int().min(1).max(100).optional().describe('Clicks in a row (default 1)'),
});

export const moveMouseBody = z.strictObject({
  x: coordinate('X'),
  y: coordinate('Y'),
  smooth: z.boolean().optional().describe('Follow a Bezier curve instead of jumping'),
  duration_ms: milliseconds('Duration of a smooth move (default 500)'),
  hold_keys: holdKeys,
});

// [x, y] as an array of exactly two, not z.tuple: a tuple is published as prefixItems with
// `items: false`, which openapi-python-client (and spectral's oas rules) refuse.
const pathPoint = z
  .array(z.number().min(0).describe('X, then Y coordinate on the display, in pixels'))
  .length(2)
  .describe('An [x, y] point on the display, in pixels');

export const dragMouseBody = z.strictObject({
  path: z.array(pathPoint).min(2).max(1000).describe('[x, y] points the pointer passes through, button held'),
  button: z.enum(['left', 'middle', 'right']).optional().describe('Mouse button held (default left)'),
  delay: milliseconds('Milliseconds between pressing the button and moving'),
  duration_ms: milliseconds('Duration of a smooth drag (default 500)'),
  hold_keys: holdKeys,
  smooth: z.boolean().optional().describe('Bezier segments; the step parameters are then ignored'),
  step_delay_ms: milliseconds('Milliseconds between steps (default 50)'),
  steps_per_segment: z.number().int().min(1).max(1000).optional().describe('Steps between two points (default 10)'),
});

export const pressKeyBody = z.strictObject({
  keys: z.array(z.string().min(1).regex(/^\S+$/, 'a key name has no spaces')).min(1).max(100).describe('X keysyms or combos, e.g. "Return", "ctrl+t"'),
  duration: milliseconds('Milliseconds to hold the keys (0 or absent: tap)'),
  hold_keys: holdKeys,
});

export const scrollBody = z.strictObject({
  x: coordinate('X'),
  y: coordinate('Y'),
  delta_x: z.number().int().min(-1000).max(1000).optional().describe('Wheel notches, positive to the right'),
  delta_y: z.number().int().min(-1000).max(1000).optional().describe('Wheel notches, positive down'),
  hold_keys: holdKeys,
});

export const screenshotBody = z.strictObject({
  region: z
    .strictObject({
      x: z.number().int().min(0).describe('Left edge'),
      y: z.number().int().min(0).describe('Top edge'),
      width: z.number().int().min(1).describe('Width in pixels'),
      height: z.number().int().min(1).describe('Height in pixels'),
    })
    .optional()
    .describe('Part of the display to capture (default: all of it)'),
});

export const cursorBody = z.strictObject({ hidden: z.boolean().describe('Hide (true) or show (false) the pointer') });
export const clipboardWriteBody = z.strictObject({ text: z.string().max(1_000_000).describe('Text put on the clipboard') });
export const emptyBody = z.strictObject({});

const ACTION_PAYLOADS = {
  click_mouse: clickMouseBody,
  move_mouse: moveMouseBody,
  type_text: typeTextBody,
  press_key: pressKeyBody,
  scroll: scrollBody,
  drag_mouse: dragMouseBody,
  set_cursor: cursorBody,
  sleep: z.strictObject({ duration_ms: z.number().min(0).max(60_000).describe('Milliseconds to wait') }),
} as const;

type ActionType = keyof typeof ACTION_PAYLOADS;

/** `type` plus exactly one payload, named after the type. */
const batchAction = z.discriminatedUnion(
  'type',
  (Object.keys(ACTION_PAYLOADS) as ActionType[]).map((type) =>
    z.strictObject({ type: z.literal(type), [type]: ACTION_PAYLOADS[type] }).describe(`A ${type} action`),
  ) as unknown as [z.ZodObject, ...z.ZodObject[]],
);

export const batchBody = z.strictObject({
  actions: z.array(batchAction).min(1).max(1000).describe('Actions run in order; the first failure stops the batch'),
});

export const mousePositionSchema = z.object({ x: z.number(), y: z.number() });
export const cursorResultSchema = z.object({ ok: z.boolean() });
export const clipboardSchema = z.object({ text: z.string() });
