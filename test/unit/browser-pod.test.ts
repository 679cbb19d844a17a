import { describe, expect, it } from 'vitest';
import { browserPod, type BrowserPodOptions } from '../../operator/src/k8s/browser-pod.js';
import type { BrowserLaunchSpec } from '../../operator/src/ports/browser-runtime.js';

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
