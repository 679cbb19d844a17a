import { z } from 'zod';
import { TELEMETRY_CATEGORIES, type TelemetryCategory as Category } from '../../../../contract/telemetry.js';

/** Telemetry categories (CONTRACT §1.2, contract/telemetry.ts) and how a request changes the stored config. */
export { TELEMETRY_CATEGORIES };
const ON_BY_DEFAULT: readonly Category[] = ['control', 'connection', 'system', 'captcha'];

export type TelemetryConfig = { browser: Record<Category, { enabled: boolean }> };

const toggle = z.strictObject({ enabled: z.boolean().optional() });

export const telemetryRequestSchema = z
  .strictObject({
    enabled: z.boolean().optional().describe('true: capture the default categories plus the listed ones; false: no capture'),
    browser: z
      .strictObject(Object.fromEntries(TELEMETRY_CATEGORIES.map((c) => [c, toggle.optional()])) as Record<Category, z.ZodOptional<typeof toggle>>)
      .optional()
      .describe('Categories to switch on or off'),
  })
  .refine((t) => !(t.enabled === false && t.browser !== undefined), {
    message: 'enabled false cannot be combined with browser',
    path: ['browser'],
  })
  .describe('Telemetry capture; null, {} or absent change nothing (and capture nothing on create)');

export type TelemetryRequest = z.output<typeof telemetryRequestSchema>;

const allOff = (): TelemetryConfig['browser'] =>
  Object.fromEntries(TELEMETRY_CATEGORIES.map((c) => [c, { enabled: false }])) as TelemetryConfig['browser'];

/**
 * The config after a request, from the current one (null: nothing captured).
 * - null, {} or absent: unchanged.
 * - enabled false: nothing captured.
 * - enabled true: the default set plus the listed categories.
 * - only categories: merged onto the current config (onto "all off" when none).
 * A result with no category on is null.
 */
export function applyTelemetry(current: TelemetryConfig | null, request: TelemetryRequest | null | undefined): TelemetryConfig | null {
  if (!request || (request.enabled === undefined && request.browser === undefined)) return current;
  if (request.enabled === false) return null;
  const base = request.enabled === true ? allOff() : { ...(current?.browser ?? allOff()) };
  if (request.enabled === true) for (const c of ON_BY_DEFAULT) base[c] = { enabled: true };
  for (const c of TELEMETRY_CATEGORIES) {
    const given = request.browser?.[c]?.enabled;
    if (given !== undefined) base[c] = { enabled: given };
  }
  return Object.values(base).some((c) => c.enabled) ? { browser: base } : null;
}

/** The categories a config captures (none for null). */
export function enabledCategories(config: TelemetryConfig | null): Category[] {
  if (!config) return [];
  return TELEMETRY_CATEGORIES.filter((c) => config.browser[c]?.enabled === true);
}
