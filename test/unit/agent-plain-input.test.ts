import { describe, expect, it } from 'vitest';
import { agentResetRequestSchema, agentSettingsRequestSchema, agentShutdownRequestSchema, MAX_START_URL_LENGTH as CONTRACT_MAX_START_URL_LENGTH } from '../../contract/agent-wire.js';
import { BROWSER_ID_PATTERN, browserLaunchSpecSchema } from '../../contract/launch-spec.js';
import { TELEMETRY_CATEGORIES } from '../../contract/telemetry.js';
import { BROWSER_ID, MAX_START_URL_LENGTH, plainLaunchSpec, plainLiveSettings, plainResetRequest, plainShutdownRequest, TELEMETRY_CATEGORY_NAMES } from '../../agent/src/plain-input.js';
import { parseLaunchSpec } from '../../agent/src/config.js';

/**
 * The agent reads plain inputs without zod (agent/src/plain-input.ts) and leaves the rest
 * to the contract's schemas. It stays exactly as strict only if every input a reader
 * accepts is one the schema accepts, with the same result (no key missing, none added,
 * none undefined where the schema leaves it out): checked here
 * over every field replaced by values of every JSON type, valid and not.
 */

const SAMPLES: unknown[] = [
  undefined, null, true, false, 0, 1, -1, 1.5, 1920, 10_000, 10_001, 2 ** 53, '', 'a', 'x y', 'about:blank', 'http://proxy.test:8080',
  [], ['a'], ['a', 1], {}, { a: 'b' }, { a: 1 }, { a: null }, JSON.parse('{"__proto__":{"x":"y"}}') as unknown,
  { width: 800, height: 600 }, { width: 800, height: 600, refreshRate: 60 }, { width: 800, height: 600, extra: 1 }, { width: 0, height: 600 }, { width: 800.5, height: 600 },
  { width: 800, height: 600, refreshRate: '60' }, { url: 'http://p.test' }, { url: 'http://p.test', username: 'u', password: 'p', bypassHosts: ['a.test'] },
  { url: 'http://p.test', bypassHosts: [1] }, { url: 1 }, { password: 'p' }, { id: 'p1', archiveUrl: 'http://a.test/x', saveChanges: true },
  { id: 'p1', archiveUrl: 'http://a.test/x' }, { id: 'p1', archiveUrl: 'http://a.test/x', saveChanges: 'yes' },
  { ingestUrl: 'http://api.test/t?token=1.x', categories: ['console', 'network'] }, { ingestUrl: 'http://api.test/t', categories: [] },
  { ingestUrl: 'http://api.test/t', categories: ['console', 'console'] }, { ingestUrl: 'http://api.test/t', categories: ['nope'] },
  { ingestUrl: 'http://api.test/t', categories: ['console', 1] }, { ingestUrl: 'http://api.test/t', categories: 'console' },
  { ingestUrl: 'http://api.test/t', categories: ['__proto__'] }, { ingestUrl: 'http://api.test/t', categories: ['toString'] },
  // eslint-disable-next-line no-sparse-arrays
  { ingestUrl: 'http://api.test/t', categories: [, 'console'] }, { ingestUrl: 1, categories: [] }, { categories: ['console'] }, { ingestUrl: 'http://api.test/t' },
  { ingestUrl: 'http://api.test/t', categories: [], extra: 1 },
];

const TELEMETRY = { ingestUrl: 'http://api.test/internal/browsers/b/telemetry?token=1.x', categories: ['console', 'network', 'page'] };

const FULL_SPEC = {
  browserId: 'abc_DEF-123',
  orgId: 'org',
  projectId: 'proj',
  headless: false,
  stealth: true,
  kioskMode: true,
  viewport: { width: 1280, height: 720, refreshRate: 30 },
  startUrl: 'https://example.test/',
  proxy: { url: 'http://proxy.test:3128', username: 'u', password: 'secret', bypassHosts: ['a.test', '*.b.test'] },
  chromePolicy: { DefaultCookiesSetting: 1, URLBlocklist: ['x.test'], Nested: { a: [null] } },
  labels: { pool: 'p1', tag: 'x' },
  profile: { id: 'prof', archiveUrl: 'http://api.test/profiles/prof', saveChanges: true },
  telemetry: TELEMETRY,
};

/** The specs the service and the operator actually send: the reader must take every one itself. */
const PLAIN_SPECS: unknown[] = [
  { browserId: 'b' },
  { browserId: 'b', headless: true },
  { browserId: 'b', orgId: 'o', projectId: 'p', headless: true, stealth: false, kioskMode: false, viewport: { width: 1920, height: 1080 }, chromePolicy: {}, labels: {} },
  { browserId: 'b', proxy: { url: 'http://p.test' } },
  { browserId: 'b', labels: { 'browserplane.dev/pool': 'p' }, telemetry: TELEMETRY },
  FULL_SPEC,
];

function variants(base: Record<string, unknown>, keys: string[]): unknown[] {
  const out: unknown[] = [base];
  for (const key of keys) {
    const { [key]: _dropped, ...without } = base;
    out.push(without);
    for (const sample of SAMPLES) out.push({ ...base, [key]: sample });
  }
  out.push({ ...base, unknown: 1 }, ...SAMPLES);
  return out;
}

/** Accepted by the reader means accepted by the schema, with the same value. */
function expectSubsetOf(read: (raw: unknown) => unknown, schema: { safeParse(raw: unknown): { success: boolean; data?: unknown } }, inputs: unknown[]): number {
  let accepted = 0;
  for (const input of inputs) {
    const plain = read(input);
    if (plain === undefined) continue;
    accepted++;
    const checked = schema.safeParse(input);
    expect(checked.success, JSON.stringify(input)).toBe(true);
    expect(plain, JSON.stringify(input)).toStrictEqual(checked.data);
  }
  return accepted;
}

describe('plain inputs read without zod', () => {
  it('keeps the constants it copies equal to the contract', () => {
    expect(BROWSER_ID.source).toBe(BROWSER_ID_PATTERN.source);
    expect(BROWSER_ID.flags).toBe(BROWSER_ID_PATTERN.flags);
    expect(MAX_START_URL_LENGTH).toBe(CONTRACT_MAX_START_URL_LENGTH);
    expect(TELEMETRY_CATEGORY_NAMES).toStrictEqual(TELEMETRY_CATEGORIES);
  });

  it('reads a launch spec’s and a /settings body’s telemetry itself, and leaves a bad one to the schema', async () => {
    expect(plainLaunchSpec({ browserId: 'b', telemetry: TELEMETRY })?.telemetry).toStrictEqual(TELEMETRY);
    expect(plainLiveSettings({ telemetry: { ingestUrl: 'http://api.test/t', categories: [] } })).toStrictEqual({ telemetry: { ingestUrl: 'http://api.test/t', categories: [] } });
    // A category this agent does not know is left out by both readers: a newer API may name one.
    for (const unknown of [['nope', 'console'], ['toString', 'console']]) {
      const telemetry = { ingestUrl: 'http://api.test/t', categories: unknown };
      expect(plainLaunchSpec({ browserId: 'b', telemetry })?.telemetry).toStrictEqual({ ingestUrl: 'http://api.test/t', categories: ['console'] });
      expect((await parseLaunchSpec({ browserId: 'b', telemetry })).telemetry).toStrictEqual({ ingestUrl: 'http://api.test/t', categories: ['console'] });
    }
    for (const bad of [{ ingestUrl: 'http://api.test/t', categories: [5] }, { ingestUrl: 'http://api.test/t' }, { ingestUrl: 'http://api.test/t', categories: [{}] }, null]) {
      expect(plainLaunchSpec({ browserId: 'b', telemetry: bad }), JSON.stringify(bad)).toBeUndefined();
      expect(plainLiveSettings({ telemetry: bad }), JSON.stringify(bad)).toBeUndefined();
    }
    // The schema then words the refusal.
    await expect(parseLaunchSpec({ browserId: 'b', telemetry: { ingestUrl: 'http://api.test/t', categories: [5] } })).rejects.toThrow(/^AGENT_SPEC\.telemetry\.categories\.0 /);
    await expect(parseLaunchSpec({ browserId: 'b', telemetry: { categories: [] } })).rejects.toThrow(/^AGENT_SPEC\.telemetry\.ingestUrl /);
    // A copy, not the input's own array: the agent's state is not shared with its input.
    const spec = { browserId: 'b', telemetry: { ingestUrl: 'http://api.test/t', categories: ['console'] } };
    expect(plainLaunchSpec(spec)?.telemetry?.categories).not.toBe(spec.telemetry.categories);
  });

  it('reads launch specs as browserLaunchSpecSchema does, or leaves them to it', () => {
    const inputs = [...variants(FULL_SPEC, Object.keys(FULL_SPEC)), ...variants({ browserId: 'b' }, Object.keys(FULL_SPEC))];
    for (const id of ['', 'a'.repeat(128), 'a'.repeat(129), 'a b', 'é', 'a\n']) inputs.push({ browserId: id });
    expect(expectSubsetOf(plainLaunchSpec, browserLaunchSpecSchema, inputs)).toBeGreaterThan(50);
    for (const spec of PLAIN_SPECS) expect(plainLaunchSpec(spec), JSON.stringify(spec)).toBeDefined();
  });

  it('reads /settings, /shutdown and /reset bodies as their schemas do, or leaves them to them', () => {
    const settings = { proxy: FULL_SPEC.proxy, viewport: { width: 800, height: 600 }, profile: FULL_SPEC.profile, telemetry: TELEMETRY };
    expect(expectSubsetOf(plainLiveSettings, agentSettingsRequestSchema, [...variants(settings, Object.keys(settings)), ...variants({}, Object.keys(settings))])).toBeGreaterThan(20);
    for (const body of [{}, { proxy: null }, { viewport: { width: 800, height: 600 } }, settings]) expect(plainLiveSettings(body)).toBeDefined();

    const shutdown = { grace_ms: 5000, save_profile: false };
    const shutdowns = [...variants(shutdown, Object.keys(shutdown)), ...variants({}, Object.keys(shutdown))];
    expect(expectSubsetOf(plainShutdownRequest, agentShutdownRequestSchema, shutdowns)).toBeGreaterThan(5);
    for (const body of [{}, { grace_ms: 0 }, shutdown]) expect(plainShutdownRequest(body)).toBeDefined();

    const resets = [...variants({ start_url: 'https://a.test/' }, ['start_url']), { start_url: 'x'.repeat(MAX_START_URL_LENGTH) }, { start_url: 'x'.repeat(MAX_START_URL_LENGTH + 1) }];
    expect(expectSubsetOf(plainResetRequest, agentResetRequestSchema, resets)).toBeGreaterThan(3);
    expect(plainResetRequest({ start_url: 'x'.repeat(MAX_START_URL_LENGTH + 1) })).toBeUndefined();
  });

  it('leaves every error to the schema, worded as before', async () => {
    await expect(parseLaunchSpec({ browserId: 'a b' })).rejects.toThrow(/^AGENT_SPEC\.browserId must match \[A-Za-z0-9_-\]\{1,128\}$/);
    await expect(parseLaunchSpec({ browserId: 'b', viewport: { width: 0, height: 1 } })).rejects.toThrow(/^AGENT_SPEC\.viewport\.width /);
    await expect(parseLaunchSpec({ browserId: 'b', headless: 'yes' })).rejects.toThrow(/^AGENT_SPEC\.headless /);
    await expect(parseLaunchSpec([])).rejects.toThrow('AGENT_SPEC must be a JSON object');
    // Not plain (an unknown key), yet valid: the schema takes it and drops the key.
    await expect(parseLaunchSpec({ browserId: 'b', extra: 1 })).resolves.toStrictEqual(browserLaunchSpecSchema.parse({ browserId: 'b' }));
  });
});
