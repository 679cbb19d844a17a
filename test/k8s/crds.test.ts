import { readFileSync } from 'node:fs';
import { CustomObjectsApi } from '@kubernetes/client-node';
import { Agent, fetch } from 'undici';
import { beforeAll, describe, expect, inject, it } from 'vitest';
import { API_VERSION, GROUP, VERSION } from '../../operator/src/k8s/crds.js';
import { freshNamespace, installCrds, kubeConfig } from './support/kube.js';

const KIND_OF = { browserpools: 'BrowserPool', browsersessions: 'BrowserSession', authconnections: 'AuthConnection' } as const;
type Plural = keyof typeof KIND_OF;

let namespace: string;
let counter = 0;
const objects = () => kubeConfig().makeApiClient(CustomObjectsApi);

async function create(plural: Plural, spec: unknown): Promise<{ status: number; message: string; body?: Record<string, unknown> }> {
  try {
    const body = (await objects().createNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      namespace,
      plural,
      fieldValidation: 'Strict',
      body: { apiVersion: API_VERSION, kind: KIND_OF[plural], metadata: { name: `r${++counter}` }, spec },
    })) as Record<string, unknown>;
    return { status: 201, message: '', body };
  } catch (error) {
    const { code, body } = error as { code: number; body: string };
    return { status: code, message: (JSON.parse(body) as { message: string }).message };
  }
}

beforeAll(async () => {
  await installCrds();
  namespace = await freshNamespace('crds');
});

describe('the CRDs on a real API server', () => {
  it.each([
    ['browserpools', { size: 3, headless: true, fillRatePerMinute: 50, viewport: { width: 800, height: 600, refreshRate: 30 }, profile: { name: 'shop' }, refreshOnProfileUpdate: true, chromePolicy: { HomepageLocation: 'https://example.com' }, telemetry: { enabled: true }, extensions: [{ name: 'adblock' }, { id: 'ext_1' }], project: 'team-a' }],
    ['browsersessions', { headless: true, stealth: true, timeoutSeconds: 60, tags: { cost_center: 'a' }, startUrl: 'https://example.com/' }],
    ['authconnections', { domain: 'example.com', profileName: 'shop', credential: { name: 'shop-login' }, healthCheckInterval: 600, allowedDomains: ['login.example.com'] }],
  ] as const)('accepts a valid %s resource and stores the spec as written', async (plural, spec) => {
    const result = await create(plural, spec);
    expect(result.message).toBe('');
    expect(result.body!.spec).toEqual(spec);
  });

  it.each([
    ['browserpools', { size: 0 }, 'spec.size'],
    ['browserpools', {}, 'spec.size: Required value'],
    ['browserpools', { size: 2, refreshOnProfileUpdate: true }, 'refreshOnProfileUpdate needs a profile'],
    ['browserpools', { size: 2, profile: { id: 'a', name: 'b' } }, 'give exactly one of id or name'],
    ['browserpools', { size: 2, name: 'bad\u0007name' }, 'spec.name in body should match'],
    ['browserpools', { size: 2, viewport: { width: 99_999, height: 10 } }, 'spec.viewport.width'],
    ['browsersessions', { gpu: true }, 'no GPU is available'],
    ['browsersessions', { timeoutSeconds: 5 }, 'spec.timeoutSeconds'],
    ['browsersessions', { profile: { name: 'no spaces allowed' } }, 'spec.profile.name'],
    ['authconnections', { domain: 'example.com' }, 'spec.profileName: Required value'],
    ['authconnections', { domain: 'example.com', profileName: 'p', credential: { name: 'c', provider: 'v' } }, 'name cannot be combined with provider'],
    ['authconnections', { domain: 'example.com', profileName: 'p', credential: { path: 'x' } }, 'give a name, or a provider'],
  ] as const)('refuses %s %j with the rule’s message', async (plural, spec, message) => {
    const result = await create(plural, spec);
    expect(result.status).toBe(422);
    expect(result.message).toContain(message);
  });

  it('refuses unknown fields under strict field validation, spelled the API’s way or not', async () => {
    const snake = await create('browserpools', { size: 1, fill_rate_per_minute: 5 });
    expect(snake.status).toBe(400);
    expect(snake.message).toContain('unknown field "spec.fill_rate_per_minute"');
  });

  it('keeps status apart: a status write does not move the generation, a spec change does', async () => {
    const created = await create('browserpools', { size: 1 });
    const name = (created.body!.metadata as { name: string }).name;
    const api = objects();
    const base = { group: GROUP, version: VERSION, namespace, plural: 'browserpools', name };
    const before = (await api.getNamespacedCustomObject(base)) as { metadata: { generation: number } };
    await api.patchNamespacedCustomObjectStatus({
      ...base,
      body: [{ op: 'add', path: '/status', value: { observedGeneration: 1, availableCount: 1, conditions: [{ type: 'Ready', status: 'True', reason: 'Filled', message: '1 of 1 idle', lastTransitionTime: new Date().toISOString().replace(/\.\d+Z$/, 'Z') }] } }],
    });
    const afterStatus = (await api.getNamespacedCustomObject(base)) as { metadata: { generation: number }; status: { availableCount: number } };
    expect(afterStatus.metadata.generation).toBe(before.metadata.generation);
    expect(afterStatus.status.availableCount).toBe(1);
    await api.patchNamespacedCustomObject({ ...base, body: [{ op: 'replace', path: '/spec/size', value: 2 }] });
    const afterSpec = (await api.getNamespacedCustomObject(base)) as { metadata: { generation: number } };
    expect(afterSpec.metadata.generation).toBe(before.metadata.generation + 1);
  });

  it('serves the printer columns kubectl get shows', async () => {
    const { server, caFile, adminToken } = inject('controlPlane');
    await create('browserpools', { size: 4 });
    const response = await fetch(`${server}/apis/${GROUP}/${VERSION}/namespaces/${namespace}/browserpools`, {
      headers: { authorization: `Bearer ${adminToken}`, accept: 'application/json;as=Table;v=v1;g=meta.k8s.io' },
      dispatcher: new Agent({ connect: { ca: readFileSync(caFile) } }),
    });
    const table = (await response.json()) as { columnDefinitions: { name: string }[]; rows: { cells: unknown[] }[] };
    expect(table.columnDefinitions.map((c) => c.name)).toEqual(['Name', 'Size', 'Available', 'Acquired', 'Starting', 'Ready', 'Age']);
    expect(table.rows.some((row) => row.cells[1] === 4)).toBe(true);
  });

  it('lets a user without bindings see nothing', async () => {
    const nobody = kubeConfig(inject('controlPlane').nobodyToken).makeApiClient(CustomObjectsApi);
    await expect(nobody.listNamespacedCustomObject({ group: GROUP, version: VERSION, namespace, plural: 'browserpools' })).rejects.toMatchObject({ code: 403 });
  });
});
