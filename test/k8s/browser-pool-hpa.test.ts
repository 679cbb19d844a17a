import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { Agent, fetch } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API_VERSION, PLURALS } from '../../contract/kinds.js';
import { eventually } from '../support/eventually.js';
import { startControlPlane, type ControlPlane } from './support/control-plane.js';
import { committedCrds } from './support/kube.js';

// A HorizontalPodAutoscaler sizing a BrowserPool through its scale subresource, on a real
// kube-apiserver and kube-controller-manager (the HPA controller among its controllers) of
// this file's own: no metrics API runs here, so the HPA is checked where it needs none. It
// reads the pool's scale (AbleToScale), and an HPA whose minReplicas is above the pool's size
// raises spec.size to it, as it does before consulting any metric. The operator's side (a
// new spec.size reaches the pool, status.replicas and selector) is browser-pool-reconciler's.

let plane: ControlPlane;
let namespace: string;

async function request(method: string, urlPath: string, body?: unknown, contentType = 'application/json'): Promise<{ status: number; body: any }> {
  const dispatcher = new Agent({ connect: { ca: readFileSync(plane.caFile) } });
  try {
    const response = await fetch(plane.server + urlPath, {
      method,
      headers: { authorization: `Bearer ${plane.adminToken}`, 'content-type': contentType, accept: 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
      dispatcher,
    });
    const text = await response.text();
    return { status: response.status, body: text.startsWith('{') ? JSON.parse(text) : text };
  } finally {
    await dispatcher.close();
  }
}

interface KubeAnswer {
  kind?: string;
  spec: { size?: number; replicas?: number };
  status?: { replicas?: number; selector?: string; desiredReplicas?: number; conditions?: { type: string; status: string }[] };
}

async function must(method: string, urlPath: string, body?: unknown, contentType?: string): Promise<KubeAnswer> {
  const answer = await request(method, urlPath, body, contentType);
  if (answer.status >= 300) throw new Error(`${method} ${urlPath}: ${answer.status} ${JSON.stringify(answer.body)}`);
  return answer.body as KubeAnswer;
}

const poolPath = (name: string) => `/apis/${API_VERSION}/namespaces/${namespace}/${PLURALS.BrowserPool}/${name}`;

beforeAll(async () => {
  plane = await startControlPlane({ controllerManager: true });
  for (const crd of committedCrds()) {
    await must('PATCH', `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${crd.metadata!.name!}?fieldManager=browserplane-tests&force=true`, crd, 'application/apply-patch+yaml');
  }
  await eventually(async () => (await request('GET', `/apis/${API_VERSION}`)).status === 200, { timeoutMs: 30_000, intervalMs: 200, what: 'the CRDs served' });
  namespace = `hpa-${randomBytes(4).toString('hex')}`;
  await must('POST', '/api/v1/namespaces', { metadata: { name: namespace } });
}, 600_000);
afterAll(async () => {
  await plane?.stop();
});

describe('a BrowserPool under a HorizontalPodAutoscaler', () => {
  it('exposes spec.size, status.replicas and the selector as its scale, and kubectl scale changes spec.size', async () => {
    await must('POST', poolPath('').slice(0, -1), { apiVersion: API_VERSION, kind: 'BrowserPool', metadata: { name: 'crawlers' }, spec: { size: 1, headless: true } });
    // What the operator writes (browser-pool-plan.ts poolStatusOf), written here by hand: no operator runs in this file.
    await must('PATCH', `${poolPath('crawlers')}/status`, { status: { replicas: 1, selector: 'browserplane.dev/pool=pool_x' } }, 'application/merge-patch+json');
    const scale = await must('GET', `${poolPath('crawlers')}/scale`);
    expect(scale).toMatchObject({ kind: 'Scale', spec: { replicas: 1 }, status: { replicas: 1, selector: 'browserplane.dev/pool=pool_x' } });
    await must('PATCH', `${poolPath('crawlers')}/scale`, { spec: { replicas: 3 } }, 'application/merge-patch+json');
    expect((await must('GET', poolPath('crawlers'))).spec.size).toBe(3);
    // The CRD's own rules hold through /scale: a pool keeps at least one browser.
    const zero = await request('PATCH', `${poolPath('crawlers')}/scale`, { spec: { replicas: 0 } }, 'application/merge-patch+json');
    expect(zero.status).toBe(422);
    expect((await must('GET', poolPath('crawlers'))).spec.size).toBe(3);
  });

  it('is sized by the HPA controller through that scale', async () => {
    await must('PATCH', `${poolPath('crawlers')}/scale`, { spec: { replicas: 1 } }, 'application/merge-patch+json');
    await must('POST', `/apis/autoscaling/v2/namespaces/${namespace}/horizontalpodautoscalers`, {
      apiVersion: 'autoscaling/v2',
      kind: 'HorizontalPodAutoscaler',
      metadata: { name: 'crawlers' },
      spec: {
        scaleTargetRef: { apiVersion: API_VERSION, kind: 'BrowserPool', name: 'crawlers' },
        minReplicas: 2,
        maxReplicas: 5,
        // KEDA's shape: an external metric (acquire waiters); none is served here, which is the point.
        metrics: [{ type: 'External', external: { metric: { name: 'browserplane_pool_acquire_waiters', selector: { matchLabels: { pool: 'crawlers' } } }, target: { type: 'AverageValue', averageValue: '1' } } }],
      },
    });
    // The HPA controller syncs every 15 s.
    const sized = await eventually(async () => (await must('GET', poolPath('crawlers'))).spec.size === 2, { timeoutMs: 90_000, intervalMs: 500, what: 'the HPA raising spec.size to minReplicas' });
    expect(sized).toBe(true);
    const hpa = await eventually(
      async () => {
        const object = await must('GET', `/apis/autoscaling/v2/namespaces/${namespace}/horizontalpodautoscalers/crawlers`);
        return object.status?.conditions?.some((c) => c.type === 'AbleToScale' && c.status === 'True') && object;
      },
      { timeoutMs: 90_000, intervalMs: 500, what: 'the HPA able to scale' },
    );
    expect(hpa.status?.desiredReplicas).toBe(2);
  }, 120_000);
});
