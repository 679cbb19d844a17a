import { describe, expect, it } from 'vitest';
import { BROWSER_SECRET_KEYS, browserPod, browserPodName, browserSecret, type BrowserPodOptions } from '../../operator/src/k8s/browser-pod.js';
import { agentFsEnv } from '../../api/src/config.js';
import { parseOperatorConfig } from '../../operator/src/config.js';
import { agentTokensFrom } from '../../contract/agent-client.js';
import type { BrowserLaunchSpec } from '../../contract/browser-runtime.js';

const spec: BrowserLaunchSpec = {
  browserId: 'bs_unit1',
  orgId: 'org_a',
  projectId: 'proj_a',
  headless: true,
  stealth: false,
  kioskMode: false,
  viewport: { width: 1024, height: 768 },
  chromePolicy: {},
  labels: {},
};
const base: BrowserPodOptions = { namespace: 'ns', image: 'browserplane/browser:1' };

describe('browserPod placement', () => {
  it('leaves out the placement fields the chart passes empty (its defaults), so the pod is the one made without them', () => {
    const withDefaults = browserPod(spec, { ...base, imagePullSecrets: [], nodeSelector: {}, tolerations: [], runtimeClassName: '' });
    const withNulls = browserPod(spec, { ...base, imagePullSecrets: null, nodeSelector: null, tolerations: null, runtimeClassName: null });
    expect(withDefaults).toEqual(browserPod(spec, base));
    expect(withNulls).toEqual(browserPod(spec, base));
    // runtimeClassName "" would be refused by the API server: it must be absent, not empty.
    expect(withDefaults.spec).not.toHaveProperty('runtimeClassName');
    expect(withDefaults.spec).not.toHaveProperty('nodeSelector');
  });

  it('puts the image pull secrets, node selector, tolerations and RuntimeClass on the pod spec', () => {
    const tolerations = [{ key: 'browserplane.dev/browsers', operator: 'Exists', effect: 'NoSchedule' }];
    const pod = browserPod(spec, { ...base, imagePullSecrets: [{ name: 'regcred' }], nodeSelector: { pool: 'gpu' }, tolerations, runtimeClassName: 'gvisor' });
    expect(pod.spec).toMatchObject({ imagePullSecrets: [{ name: 'regcred' }], nodeSelector: { pool: 'gpu' }, tolerations, runtimeClassName: 'gvisor' });
    // Copies: a later change to the settings object does not reach pods already built.
    tolerations[0]!.key = 'changed';
    expect(pod.spec?.tolerations?.[0]?.key).toBe('browserplane.dev/browsers');
  });
});

describe('the browser pod’s agent token', () => {
  const token = agentTokensFrom(Buffer.alloc(32, 7))(spec.browserId);

  it('travels in the pod’s Secret and reaches the agent as AGENT_TOKEN from it, never in the pod spec', () => {
    const secret = browserSecret(spec, base, token);
    expect(secret.metadata?.name).toBe(browserPodName(spec.browserId));
    expect(secret.stringData?.[BROWSER_SECRET_KEYS.agentToken]).toBe(token);
    const pod = browserPod(spec, base);
    const env = pod.spec!.containers[0]!.env!;
    expect(env.find((variable) => variable.name === 'AGENT_TOKEN')).toEqual({
      name: 'AGENT_TOKEN',
      valueFrom: { secretKeyRef: { name: secret.metadata!.name, key: BROWSER_SECRET_KEYS.agentToken } },
    });
    expect(JSON.stringify(pod)).not.toContain(token);
  });

  it('leaves the probes without headers: /health answers them with the phase alone', () => {
    const container = browserPod(spec, base).spec!.containers[0]!;
    for (const probe of [container.readinessProbe, container.livenessProbe]) {
      expect(probe?.httpGet).toEqual({ path: '/health', port: 'agent' });
    }
  });

  const operatorEnv = { BROWSERPLANE_ENCRYPTION_KEY: 'a'.repeat(64), BROWSERPLANE_BROWSER_POD: JSON.stringify({ image: 'browserplane/browser:1' }) };
  it('hands the file API and log stream limits to the agent, as the operator passes them from its settings', () => {
    const limits = agentFsEnv(parseOperatorConfig({ ...operatorEnv, BROWSERPLANE_BROWSER_DISK_QUOTA_MB: '256', BROWSERPLANE_BROWSER_LOG_STREAMS_MAX: '3' }));
    const env = browserPod(spec, { ...base, agentEnv: limits }).spec!.containers[0]!.env!;
    expect(env.find((e) => e.name === 'AGENT_FS_QUOTA_MB')).toEqual({ name: 'AGENT_FS_QUOTA_MB', value: '256' });
    expect(env.find((e) => e.name === 'AGENT_LOGS_MAX_STREAMS')).toEqual({ name: 'AGENT_LOGS_MAX_STREAMS', value: '3' });
    expect(env.filter((e) => /^AGENT_(FS|LOGS)_/.test(e.name)).map((e) => e.name).sort()).toEqual(Object.keys(limits).sort());
    // The defaults when nothing is set: the documented 1024 MiB quota.
    expect(agentFsEnv(parseOperatorConfig(operatorEnv)).AGENT_FS_QUOTA_MB).toBe('1024');
    expect(browserPod(spec, base).spec!.containers[0]!.env!.some((e) => e.name.startsWith('AGENT_FS_'))).toBe(false);
  });
});
