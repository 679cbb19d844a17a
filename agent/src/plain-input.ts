import type { BrowserLaunchSpec, LiveBrowserSettings, ProfileTarget, ProxySpec, Viewport } from '../../contract/launch-spec.js';
import type { TelemetryCategory, TelemetrySpec } from '../../contract/telemetry.js';

/**
 * The agent's inputs that are plainly valid, read without zod. Loading zod and building
 * the contract's schemas costs an agent about 6.5 MiB of its idle memory and 55-80 ms of
 * CPU on every start (a standby's too), and nearly every input is a plain, valid one. So
 * each reader here accepts only a subset of what the contract's schema accepts and
 * returns what the schema would (same keys, same defaults); anything else
 * (a wrong type, an unknown shape, an edge like a `__proto__` key) returns undefined and
 * the caller asks the contract's schema, which decides and words the error. The wire
 * stays exactly as strict, and the schema stays the one definition:
 * test/unit/agent-plain-input.test.ts checks every reader against it.
 */

type Plain = Record<string, unknown>;

/** BROWSER_ID_PATTERN of contract/launch-spec.ts (that module loads zod); the test keeps them equal. */
export const BROWSER_ID = /^[A-Za-z0-9_-]{1,128}$/;

/** A JSON object as JSON.parse makes them; anything else is for the schema to judge. */
function plainObject(value: unknown): value is Plain {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const proto = Object.getPrototypeOf(value) as unknown;
  return (proto === Object.prototype || proto === null) && !Object.hasOwn(value, '__proto__');
}

/** Own keys all known, none of them undefined (the schema treats a present undefined its own way). */
function onlyKeys(value: Plain, keys: readonly string[]): boolean {
  for (const key of Object.keys(value)) if (!keys.includes(key) || value[key] === undefined) return false;
  return true;
}

const isString = (value: unknown): value is string => typeof value === 'string';
const isBoolean = (value: unknown): value is boolean => typeof value === 'boolean';
const isDimension = (value: unknown): value is number => Number.isInteger(value) && (value as number) > 0 && (value as number) <= 10_000;

const NOT_PLAIN = Symbol('not plain');
type Read<T> = T | typeof NOT_PLAIN;

/** An optional field: absent stays absent; present, it must pass `read`. */
function optional<T>(value: Plain, key: string, read: (field: unknown) => Read<T>): Read<T | undefined> {
  return Object.hasOwn(value, key) ? read(value[key]) : undefined;
}

function withDefault<T>(value: Plain, key: string, fallback: () => T, accept: (field: unknown) => field is T): Read<T> {
  if (!Object.hasOwn(value, key)) return fallback();
  return accept(value[key]) ? value[key] : NOT_PLAIN;
}

function viewport(value: unknown): Read<Viewport> {
  if (!plainObject(value) || !onlyKeys(value, ['width', 'height', 'refreshRate'])) return NOT_PLAIN;
  if (!isDimension(value.width) || !isDimension(value.height)) return NOT_PLAIN;
  if (value.refreshRate === undefined) return { width: value.width, height: value.height };
  return Number.isFinite(value.refreshRate) ? { width: value.width, height: value.height, refreshRate: value.refreshRate as number } : NOT_PLAIN;
}

function proxy(value: unknown): Read<ProxySpec> {
  if (!plainObject(value) || !onlyKeys(value, ['url', 'username', 'password', 'bypassHosts']) || !isString(value.url)) return NOT_PLAIN;
  const spec: ProxySpec = { url: value.url, bypassHosts: [] };
  for (const key of ['username', 'password'] as const) {
    if (value[key] === undefined) continue;
    if (!isString(value[key])) return NOT_PLAIN;
    spec[key] = value[key];
  }
  if (value.bypassHosts !== undefined) {
    if (!Array.isArray(value.bypassHosts) || !value.bypassHosts.every(isString)) return NOT_PLAIN;
    spec.bypassHosts = [...value.bypassHosts];
  }
  return spec;
}

function profile(value: unknown): Read<ProfileTarget> {
  if (!plainObject(value) || !onlyKeys(value, ['id', 'archiveUrl', 'saveChanges'])) return NOT_PLAIN;
  return isString(value.id) && isString(value.archiveUrl) && isBoolean(value.saveChanges) ? { id: value.id, archiveUrl: value.archiveUrl, saveChanges: value.saveChanges } : NOT_PLAIN;
}

/** TELEMETRY_CATEGORIES of contract/telemetry.ts (that module loads zod); the test keeps them equal. */
export const TELEMETRY_CATEGORY_NAMES: readonly TelemetryCategory[] = ['captcha', 'connection', 'console', 'control', 'interaction', 'monitor', 'network', 'page', 'platform', 'screenshot', 'system'];
const isCategory = (value: unknown): value is TelemetryCategory => TELEMETRY_CATEGORY_NAMES.includes(value as TelemetryCategory);

function telemetry(value: unknown): Read<TelemetrySpec> {
  if (!plainObject(value) || !onlyKeys(value, ['ingestUrl', 'categories']) || !isString(value.ingestUrl) || !Array.isArray(value.categories)) return NOT_PLAIN;
  const categories: TelemetryCategory[] = [];
  // Indexed, not every(): a sparse array's holes are undefined to the schema.
  for (let i = 0; i < value.categories.length; i++) {
    const category: unknown = value.categories[i];
    if (typeof category !== 'string' || category.length > 64) return NOT_PLAIN;
    // A name this agent does not know is left out, as the schema leaves it (a newer API may send one).
    if (isCategory(category)) categories.push(category);
  }
  return { ingestUrl: value.ingestUrl, categories };
}

function record<T>(value: unknown, accept: (field: unknown) => field is T): Read<Record<string, T>> {
  if (!plainObject(value)) return NOT_PLAIN;
  const copy: Record<string, T> = {};
  for (const [key, field] of Object.entries(value)) {
    if (!accept(field)) return NOT_PLAIN;
    copy[key] = field;
  }
  return copy;
}

const anything = (field: unknown): field is unknown => field !== undefined;

const SPEC_KEYS = ['browserId', 'orgId', 'projectId', 'headless', 'stealth', 'kioskMode', 'viewport', 'startUrl', 'proxy', 'chromePolicy', 'labels', 'profile', 'telemetry'] as const;

/**
 * A launch spec as browserLaunchSpecSchema would return it, or undefined for the schema
 * to decide. Unknown keys are left to the schema too (it drops them): a plain spec has none.
 */
export function plainLaunchSpec(raw: unknown): BrowserLaunchSpec | undefined {
  if (!plainObject(raw) || !onlyKeys(raw, SPEC_KEYS)) return undefined;
  if (!isString(raw.browserId) || !BROWSER_ID.test(raw.browserId)) return undefined;
  const spec = {
    browserId: raw.browserId,
    orgId: withDefault(raw, 'orgId', () => '', isString),
    projectId: withDefault(raw, 'projectId', () => '', isString),
    headless: withDefault(raw, 'headless', () => true, isBoolean),
    stealth: withDefault(raw, 'stealth', () => false, isBoolean),
    kioskMode: withDefault(raw, 'kioskMode', () => false, isBoolean),
    viewport: Object.hasOwn(raw, 'viewport') ? viewport(raw.viewport) : { width: 1920, height: 1080 },
    startUrl: optional(raw, 'startUrl', (field) => (isString(field) ? field : NOT_PLAIN)),
    proxy: optional(raw, 'proxy', proxy),
    chromePolicy: Object.hasOwn(raw, 'chromePolicy') ? record(raw.chromePolicy, anything) : {},
    labels: Object.hasOwn(raw, 'labels') ? record(raw.labels, isString) : {},
    profile: optional(raw, 'profile', profile),
    telemetry: optional(raw, 'telemetry', telemetry),
  };
  return complete(spec, ['startUrl', 'proxy', 'profile', 'telemetry']) as BrowserLaunchSpec | undefined;
}

/** The body of POST /settings as liveBrowserSettingsSchema would return it, or undefined for the schema. */
export function plainLiveSettings(raw: unknown): LiveBrowserSettings | undefined {
  if (!plainObject(raw) || !onlyKeys(raw, ['proxy', 'viewport', 'profile', 'telemetry'])) return undefined;
  const settings = {
    proxy: optional(raw, 'proxy', (field) => (field === null ? null : proxy(field))),
    viewport: optional(raw, 'viewport', viewport),
    profile: optional(raw, 'profile', profile),
    telemetry: optional(raw, 'telemetry', telemetry),
  };
  return complete(settings, ['proxy', 'viewport', 'profile', 'telemetry']);
}

/**
 * The body of POST /shutdown as agentShutdownRequestSchema would return it, or undefined
 * for the schema (which turns a field of the wrong type into an absent one).
 */
export function plainShutdownRequest(raw: unknown): { grace_ms?: number; save_profile?: boolean } | undefined {
  if (!plainObject(raw) || !onlyKeys(raw, ['grace_ms', 'save_profile'])) return undefined;
  const request: { grace_ms?: number; save_profile?: boolean } = {};
  if (raw.grace_ms !== undefined) {
    if (!Number.isFinite(raw.grace_ms) || (raw.grace_ms as number) < 0) return undefined;
    request.grace_ms = raw.grace_ms as number;
  }
  if (raw.save_profile !== undefined) {
    if (!isBoolean(raw.save_profile)) return undefined;
    request.save_profile = raw.save_profile;
  }
  return request;
}

/** MAX_START_URL_LENGTH of contract/agent-wire.ts (that module loads zod); the test keeps them equal. */
export const MAX_START_URL_LENGTH = 2048;

/** The body of POST /reset as agentResetRequestSchema would return it, or undefined for the schema. */
export function plainResetRequest(raw: unknown): { start_url?: string } | undefined {
  if (!plainObject(raw) || !onlyKeys(raw, ['start_url'])) return undefined;
  if (raw.start_url === undefined) return {};
  return isString(raw.start_url) && raw.start_url.length <= MAX_START_URL_LENGTH ? { start_url: raw.start_url } : undefined;
}

/** Every field read, or undefined; optional fields that were absent are left out, as the schema leaves them. */
function complete(fields: Record<string, unknown>, optionalKeys: readonly string[]): Plain | undefined {
  const out: Plain = {};
  for (const [key, field] of Object.entries(fields)) {
    if (field === NOT_PLAIN) return undefined;
    if (field === undefined && optionalKeys.includes(key)) continue;
    out[key] = field;
  }
  return out;
}
