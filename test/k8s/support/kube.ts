import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { ApiextensionsV1Api, CoreV1Api, KubeConfig, type V1CustomResourceDefinition } from '@kubernetes/client-node';
import { Agent, fetch } from 'undici';
import { inject } from 'vitest';
import { parse } from 'yaml';
import { eventually } from '../../support/eventually.js';

const ROOT = path.resolve(import.meta.dirname, '../../..');

/** A KubeConfig for the test control plane, as the admin or with another token. */
export function kubeConfig(token = inject('controlPlane').adminToken): KubeConfig {
  const { server, caFile } = inject('controlPlane');
  const config = new KubeConfig();
  config.loadFromOptions({
    clusters: [{ name: 'test', server, caData: readFileSync(caFile).toString('base64') }],
    users: [{ name: 'test', token }],
    contexts: [{ name: 'test', cluster: 'test', user: 'test' }],
    currentContext: 'test',
  });
  return config;
}

/** Creates a namespace of its own for a test (no controller-manager deletes namespaces). */
export async function freshNamespace(prefix = 'test'): Promise<string> {
  const name = `${prefix}-${randomBytes(4).toString('hex')}`;
  await kubeConfig().makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name } } });
  return name;
}

/** The committed CRDs, parsed. */
export function committedCrds(): V1CustomResourceDefinition[] {
  return ['browserpools', 'browsersessions', 'authconnections'].map(
    (plural) => parse(readFileSync(path.join(ROOT, 'crds', `${plural}.yaml`), 'utf8')) as V1CustomResourceDefinition,
  );
}

export interface ApiAnswer {
  status: number;
  body: Record<string, unknown>;
  /** The API server's Warning headers (PodSecurity admission warns through them). */
  warnings: string[];
}

/**
 * A raw request to the test API server as the admin. client-node's typed models drop
 * keys they do not know the spelling of (x-kubernetes-validations read from YAML, for
 * one), so manifests go through this.
 */
export async function rawRequest(method: string, urlPath: string, body?: unknown, contentType = 'application/json'): Promise<ApiAnswer> {
  const { server, caFile, adminToken } = inject('controlPlane');
  const dispatcher = new Agent({ connect: { ca: readFileSync(caFile) } });
  try {
    const response = await fetch(server + urlPath, {
      method,
      headers: { authorization: `Bearer ${adminToken}`, 'content-type': contentType, accept: 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
      dispatcher,
    });
    const warnings = response.headers.get('warning');
    return {
      status: response.status,
      body: (await response.json()) as Record<string, unknown>,
      warnings: warnings ? warnings.split(/,\s*(?=\d{3} )/) : [],
    };
  } finally {
    await dispatcher.close();
  }
}

/** Server-side applies the committed CRDs and waits until the API server serves them. */
export async function installCrds(): Promise<void> {
  const api = kubeConfig().makeApiClient(ApiextensionsV1Api);
  for (const crd of committedCrds()) {
    const applied = await rawRequest(
      'PATCH',
      `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${crd.metadata!.name!}?fieldManager=browserplane-tests&fieldValidation=Strict&force=true`,
      crd,
      'application/apply-patch+yaml',
    );
    if (applied.status >= 300) throw new Error(`applying ${crd.metadata!.name!}: ${JSON.stringify(applied.body)}`);
  }
  for (const crd of committedCrds()) {
    await eventually(
      async () => {
        const current = await api.readCustomResourceDefinition({ name: crd.metadata!.name! });
        return current.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True');
      },
      { timeoutMs: 30_000, intervalMs: 200, what: `${crd.metadata!.name} to be established` },
    );
  }
}
