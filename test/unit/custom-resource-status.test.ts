import { describe, expect, it } from 'vitest';
import { LABELS, SESSION_REASONS as READY_REASONS } from '../../contract/kinds.js';
import type { BrowserPhase } from '../../contract/browser-runtime.js';
import {
  browserSessionResource,
  launchSettled,
  observeSession,
  sessionIdOf,
  type BrowserSessionResource,
  type BrowserSessionStatus,
} from '../../api/src/runtime/custom-resource-status.js';

const resource = (status?: BrowserSessionStatus, metadata: BrowserSessionResource['metadata'] = {}): BrowserSessionResource => ({
  apiVersion: 'browserplane.dev/v1alpha1',
  kind: 'BrowserSession',
  metadata: { name: 'bs-abc', labels: { [LABELS.sessionId]: 'bs_abc' }, ...metadata },
  spec: {},
  ...(status ? { status } : {}),
});

describe('what a BrowserSession’s status means to the runtime port', () => {
  const cases: [string, BrowserSessionResource, BrowserPhase, string | undefined, boolean][] = [
    ['no status yet', resource(), 'Pending', undefined, false],
    ['pending, no pod', resource({ phase: 'Pending' }), 'Pending', undefined, false],
    ['pending with a pod', resource({ phase: 'Pending', podName: 'browser-bs-abc' }), 'Starting', undefined, false],
    ['running without an agent URL yet', resource({ phase: 'Running' }), 'Starting', undefined, false],
    ['running with an agent URL', resource({ phase: 'Running', agentUrl: 'http://10.0.0.7:9222' }), 'Ready', undefined, true],
    [
      'failed: the message and the Ready reason',
      resource({ phase: 'Failed', message: 'exit code 139', conditions: [{ type: 'Ready', status: 'False', reason: READY_REASONS.browserExited, message: 'x' }] }),
      'Failed',
      `${READY_REASONS.browserExited}: exit code 139`,
      true,
    ],
    ['failed with nothing said', resource({ phase: 'Failed' }), 'Failed', 'the operator reported the browser Failed', true],
    ['terminating', resource({ phase: 'Terminating', agentUrl: 'http://10.0.0.7:9222' }), 'Terminating', undefined, true],
    ['deleted while running', resource({ phase: 'Running', agentUrl: 'http://10.0.0.7:9222' }, { deletionTimestamp: new Date() }), 'Terminating', undefined, true],
    ['ended', resource({ phase: 'Ended' }), 'Gone', 'the session ended', true],
  ];
  it.each(cases)('%s', (_name, given, phase, reason, settled) => {
    const observed = observeSession(given);
    expect(observed.phase).toBe(phase);
    expect(observed.reason).toBe(reason);
    expect(observed.browserId).toBe('bs_abc');
    expect(launchSettled(observed)).toBe(settled);
    if (phase === 'Ready') expect(observed.agentUrl).toBe('http://10.0.0.7:9222');
    else expect(observed.agentUrl).toBeUndefined();
  });

  it('names the session by status, then label, then resource name', () => {
    expect(sessionIdOf(resource({ sessionId: 'bs_fromstatus' }))).toBe('bs_fromstatus');
    expect(sessionIdOf(resource())).toBe('bs_abc');
    expect(sessionIdOf(resource(undefined, { name: 'bs-xyz', labels: {} }))).toBe('bs_xyz');
  });

  it('leaves the viewport refresh rate, start URL, profile and tags out when the launch has none', () => {
    const written = browserSessionResource(
      { browserId: 'bs_q', orgId: 'org_1', projectId: 'proj_1', headless: false, stealth: false, kioskMode: true, viewport: { width: 800, height: 600 }, chromePolicy: {}, labels: {} },
      'ns',
    );
    expect(written.spec).toEqual({ headless: false, stealth: false, kioskMode: true, viewport: { width: 800, height: 600 }, chromePolicy: {}, project: 'proj_1' });
    expect(written.metadata.labels?.[LABELS.poolId]).toBeUndefined();
  });
});
