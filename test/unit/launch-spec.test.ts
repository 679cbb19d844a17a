import { describe, expect, it } from 'vitest';
import type { V1Secret } from '@kubernetes/client-node';
import { parseLaunchSpec } from '../../agent/src/config.js';
import { readLaunchSpec } from '../../operator/src/reconcilers/launch-spec.js';
import { idleSinceOf, readAgentHealth, readAgentResetReport } from '../../contract/agent-wire.js';

// One launch spec schema (contract/launch-spec.ts), read by the agent from AGENT_SPEC and
// by the operator from the API's launch Secret; and the service's lenient reading of the
// agent's answers (contract/agent-wire.ts).

const secretOf = (spec: unknown): V1Secret => ({
  metadata: { name: 'bs-a1-launch' },
  data: { 'spec.json': Buffer.from(typeof spec === 'string' ? spec : JSON.stringify(spec)).toString('base64') },
});

describe('the launch spec as the agent reads it', () => {
  it('fills in the defaults of a spec that names only the browser', async () => {
    expect(await parseLaunchSpec({ browserId: 'bs_a1' })).toEqual({
      browserId: 'bs_a1',
      orgId: '',
      projectId: '',
      headless: true,
      stealth: false,
      kioskMode: false,
      viewport: { width: 1920, height: 1080 },
      chromePolicy: {},
      labels: {},
    });
  });

  it.each([
    ['not an object', [], /AGENT_SPEC must be a JSON object/],
    ['a bad browser id', { browserId: 'a b' }, /AGENT_SPEC\.browserId must match/],
    ['a viewport too large', { browserId: 'b', viewport: { width: 20_000, height: 10 } }, /AGENT_SPEC\.viewport\.width/],
    ['a proxy without a URL', { browserId: 'b', proxy: {} }, /AGENT_SPEC\.proxy\.url/],
    ['labels that are not strings', { browserId: 'b', labels: { a: 1 } }, /AGENT_SPEC\.labels\.a/],
  ])('refuses %s, naming the field', async (_what, raw, message) => {
    await expect(parseLaunchSpec(raw)).rejects.toThrow(message);
  });
});

describe('the launch spec as the operator reads it from the Secret', () => {
  const spec = { browserId: 'bs_a1', headless: true, viewport: { width: 800, height: 600 } };

  it('is present, with the defaults filled in, when it is this session’s', () => {
    expect(readLaunchSpec(secretOf(spec), 'bs_a1')).toMatchObject({ state: 'present', spec: { ...spec, labels: {}, chromePolicy: {}, stealth: false } });
  });

  it.each([
    ['no Secret', undefined, { state: 'absent' }],
    ['not JSON', secretOf('{'), { state: 'invalid', message: 'Secret bs-a1-launch: spec.json is not JSON' }],
    ['another session’s', secretOf({ ...spec, browserId: 'bs_b2' }), { state: 'invalid', message: expect.stringContaining('for browser bs_b2, not bs_a1') }],
    ['without headless', secretOf({ browserId: 'bs_a1', viewport: spec.viewport }), { state: 'invalid', message: expect.stringContaining('lacks headless or viewport') }],
    ['with a bad viewport', secretOf({ ...spec, viewport: { width: 0, height: 600 } }), { state: 'invalid', message: expect.stringContaining('spec.json.viewport.width') }],
  ])('%s', (_what, secret, expected) => {
    expect(readLaunchSpec(secret, 'bs_a1')).toEqual(expected);
  });
});

describe('the agent’s answers as the service reads them', () => {
  it('takes a full /health answer as it is', () => {
    const health = { status: 'ready', spawned: true, browser_id: 'bs_a1', browser: { version: 'Chrome/1', pid: 7, sandbox: true }, connections: 1, connections_by_kind: { cdp: 1 }, idle_since: null };
    expect(readAgentHealth(health)).toEqual(health);
  });

  it('fills in what a partial /health answer leaves out, and refuses one without a status', () => {
    expect(readAgentHealth({ status: 'ready', connections: 2, idle_since: 'x' })).toEqual({
      status: 'ready',
      spawned: false,
      browser_id: null,
      browser: null,
      connections: 2,
      connections_by_kind: {},
      idle_since: 'x',
    });
    expect(readAgentHealth({ connections: 2 })).toBeUndefined();
    expect(readAgentHealth('ready')).toBeUndefined();
  });

  it('reads idle_since as a date, or null when it is none', () => {
    expect(idleSinceOf({ idle_since: '2026-01-02T03:04:05.000Z' })).toEqual(new Date('2026-01-02T03:04:05.000Z'));
    expect(idleSinceOf({ idle_since: 'not a date' })).toBeNull();
    expect(idleSinceOf({ idle_since: null })).toBeNull();
  });

  it('counts a reset report’s missing counts as 0', () => {
    expect(readAgentResetReport({ closed_connections: 2, closed_targets: 'x' })).toEqual({ closedConnections: 2, closedTargets: 0, disposedContexts: 0, cookiesRestored: 0 });
    expect(readAgentResetReport(null)).toEqual({ closedConnections: 0, closedTargets: 0, disposedContexts: 0, cookiesRestored: 0 });
  });
});
