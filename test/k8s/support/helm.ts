import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { inject } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { rawRequest, type ApiAnswer } from './kube.js';

/**
 * Helm and server-side dry-run helpers for the chart checks. Helm is the binary
 * scripts/helm-binary.sh builds from Go modules (no download site is reachable here).
 */

export const ROOT = path.resolve(import.meta.dirname, '../../..');
export const CHART = path.join(ROOT, 'charts/browserplane');
/** The control plane's version (scripts/k8s-test-binaries.sh stamps the build with it). */
export const KUBE_VERSION = '1.36.3';

/** A Kubernetes object as rendered: only what the checks read is typed. */
export interface KubeObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  [key: string]: unknown;
}

export interface HelmResult {
  code: number;
  stdout: string;
  stderr: string;
}

let helmPath: string | undefined;

/** The cached helm binary; builds it on a fresh machine (minutes, once). */
export async function helmBinary(): Promise<string> {
  if (helmPath) return helmPath;
  const built = await run(path.join(ROOT, 'scripts/helm-binary.sh'), [], { timeout: 30 * 60_000 });
  const stdout = succeeded(built, 'scripts/helm-binary.sh');
  helmPath = stdout.trim().split('\n').at(-1)!;
  return helmPath;
}

// Helm's own config, cache and data go to a scratch directory: nothing of the user's
// (~/.config/helm repositories, plugins) changes what the checks see.
const helmHome = mkdtempSync(path.join(tmpdir(), 'browserplane-helm-'));

/** Runs helm; never throws on a non-zero exit, so tests can assert refusals. */
export async function helm(args: string[]): Promise<HelmResult> {
  const binary = await helmBinary();
  return run(binary, args, {
    timeout: 60_000,
    env: {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      HOME: helmHome,
      HELM_CONFIG_HOME: path.join(helmHome, 'config'),
      HELM_CACHE_HOME: path.join(helmHome, 'cache'),
      HELM_DATA_HOME: path.join(helmHome, 'data'),
    },
  });
}

/** Resolves with the exit code; rejects only when the program could not run (or timed out). */
function run(command: string, args: string[], options: { timeout: number; env?: NodeJS.ProcessEnv }): Promise<HelmResult> {
  return new Promise((resolve, reject) => {
    execFile(command, args, { ...options, maxBuffer: 64 * 1024 * 1024 }, (error, stdout, stderr) => {
      if (!error) resolve({ code: 0, stdout, stderr });
      else if (typeof error.code === 'number' && !error.killed) resolve({ code: error.code, stdout, stderr });
      else reject(new Error(`${command} ${args.join(' ')}: ${error.message}\n${stderr}`));
    });
  });
}

/** Throws with helm's output when it failed: for the calls that must succeed. */
export function succeeded(result: HelmResult, what: string): string {
  if (result.code !== 0) throw new Error(`${what} failed (exit ${result.code}):\n${result.stderr}\n${result.stdout}`);
  return result.stdout;
}

/** A values file of the test's own in a scratch directory. */
export function valuesFile(name: string, content: string): string {
  const file = path.join(mkdtempSync(path.join(tmpdir(), 'browserplane-values-')), name);
  writeFileSync(file, content);
  return file;
}

/** `helm template` with the given values files, parsed into objects (CRDs included when asked). */
export async function renderChart(options: {
  release?: string;
  namespace: string;
  valuesFiles?: string[];
  set?: string[];
  apiVersions?: string[];
  includeCrds?: boolean;
}): Promise<KubeObject[]> {
  const args = ['template', options.release ?? 'browserplane', CHART, '--namespace', options.namespace, '--kube-version', KUBE_VERSION];
  for (const file of options.valuesFiles ?? []) args.push('--values', file);
  for (const pair of options.set ?? []) args.push('--set', pair);
  for (const version of options.apiVersions ?? []) args.push('--api-versions', version);
  if (options.includeCrds) args.push('--include-crds');
  return parseManifests(succeeded(await helm(args), `helm ${args.join(' ')}`));
}

export function parseManifests(text: string): KubeObject[] {
  return parseAllDocuments(text)
    .map((document) => {
      if (document.errors.length > 0) throw new Error(`rendered YAML does not parse: ${document.errors[0]!.message}`);
      return document.toJS() as KubeObject | null;
    })
    .filter((object): object is KubeObject => object !== null);
}

/** A kubeconfig file for helm (install, upgrade, lookup) as the test admin. */
export function writeKubeconfig(): string {
  const { server, caFile, adminToken } = inject('controlPlane');
  const file = path.join(helmHome, 'kubeconfig');
  const config = {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'test', cluster: { server, 'certificate-authority-data': readFileSync(caFile).toString('base64') } }],
    users: [{ name: 'admin', user: { token: adminToken } }],
    contexts: [{ name: 'test', context: { cluster: 'test', user: 'admin' } }],
    'current-context': 'test',
  };
  writeFileSync(file, JSON.stringify(config), { mode: 0o600 });
  return file;
}

/** A request to the test API server as the admin (kube.ts's rawRequest). */
export const apiRequest = rawRequest;

interface Resource {
  plural: string;
  namespaced: boolean;
}

const discovery = new Map<string, Map<string, Resource>>();

/** The REST path of an object, from the API server's discovery (so CRDs resolve too). */
export async function objectPath(object: KubeObject): Promise<string> {
  const { apiVersion, kind, metadata } = object;
  const base = apiVersion.includes('/') ? `/apis/${apiVersion}` : `/api/${apiVersion}`;
  let kinds = discovery.get(apiVersion);
  if (!kinds?.has(kind)) {
    const answer = await apiRequest('GET', base);
    if (answer.status !== 200) throw new Error(`the API server does not serve ${apiVersion} (${answer.status})`);
    kinds = new Map(
      (answer.body.resources as { name: string; kind: string; namespaced: boolean }[])
        .filter((resource) => !resource.name.includes('/'))
        .map((resource) => [resource.kind, { plural: resource.name, namespaced: resource.namespaced }]),
    );
    discovery.set(apiVersion, kinds);
  }
  const resource = kinds.get(kind);
  if (!resource) throw new Error(`the API server serves no ${kind} in ${apiVersion}`);
  if (resource.namespaced && !metadata.namespace) throw new Error(`${kind}/${metadata.name} has no namespace`);
  const scope = resource.namespaced ? `/namespaces/${metadata.namespace}` : '';
  return `${base}${scope}/${resource.plural}/${metadata.name}`;
}

/**
 * Server-side apply. With dryRun the API server runs defaulting, validation (Strict: an
 * unknown or duplicate field is an error, not a silent drop) and admission, and stores
 * nothing.
 */
export async function serverSideApply(object: KubeObject, options: { dryRun: boolean }): Promise<ApiAnswer> {
  const query = `fieldManager=helm-check&fieldValidation=Strict&force=true${options.dryRun ? '&dryRun=All' : ''}`;
  return apiRequest('PATCH', `${await objectPath(object)}?${query}`, object, 'application/apply-patch+yaml');
}

/** What `kubectl auth can-i` asks: may this user do this, per the RBAC authorizer. */
export async function canI(user: string, attributes: { namespace: string; verb: string; group?: string; resource: string; name?: string; subresource?: string }): Promise<boolean> {
  const review = {
    apiVersion: 'authorization.k8s.io/v1',
    kind: 'SubjectAccessReview',
    spec: {
      user,
      groups: user.startsWith('system:serviceaccount:') ? ['system:serviceaccounts', 'system:authenticated'] : ['system:authenticated'],
      resourceAttributes: { group: '', ...attributes },
    },
  };
  const answer = await apiRequest('POST', '/apis/authorization.k8s.io/v1/subjectaccessreviews', review);
  if (answer.status !== 201) throw new Error(`SubjectAccessReview failed: ${answer.status} ${JSON.stringify(answer.body)}`);
  return (answer.body.status as { allowed: boolean }).allowed;
}

/**
 * A minimal ServiceMonitor CRD (monitoring.coreos.com/v1), so the chart's ServiceMonitor
 * meets a real schema: the subset of the Prometheus operator's own CRD that the chart
 * uses, copied from it (selector required, endpoint fields typed, durations by pattern).
 * Everything else is pruned, and refused under Strict field validation.
 */
export function serviceMonitorCrd(): KubeObject {
  const duration = { type: 'string', pattern: '^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$' };
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: 'servicemonitors.monitoring.coreos.com' },
    spec: {
      group: 'monitoring.coreos.com',
      names: { kind: 'ServiceMonitor', listKind: 'ServiceMonitorList', plural: 'servicemonitors', singular: 'servicemonitor' },
      scope: 'Namespaced',
      versions: [
        {
          name: 'v1',
          served: true,
          storage: true,
          schema: {
            openAPIV3Schema: {
              type: 'object',
              required: ['spec'],
              properties: {
                apiVersion: { type: 'string' },
                kind: { type: 'string' },
                metadata: { type: 'object' },
                spec: {
                  type: 'object',
                  required: ['selector'],
                  properties: {
                    jobLabel: { type: 'string' },
                    selector: {
                      type: 'object',
                      properties: {
                        matchLabels: { type: 'object', additionalProperties: { type: 'string' } },
                        matchExpressions: {
                          type: 'array',
                          items: {
                            type: 'object',
                            required: ['key', 'operator'],
                            properties: { key: { type: 'string' }, operator: { type: 'string' }, values: { type: 'array', items: { type: 'string' } } },
                          },
                        },
                      },
                      'x-kubernetes-map-type': 'atomic',
                    },
                    namespaceSelector: {
                      type: 'object',
                      properties: { any: { type: 'boolean' }, matchNames: { type: 'array', items: { type: 'string' } } },
                    },
                    endpoints: {
                      type: 'array',
                      items: {
                        type: 'object',
                        properties: {
                          port: { type: 'string' },
                          path: { type: 'string' },
                          scheme: { type: 'string', enum: ['http', 'https'] },
                          interval: duration,
                          scrapeTimeout: duration,
                        },
                      },
                    },
                  },
                },
              },
            },
          },
        },
      ],
    },
  };
}

/** The Gateway API release whose HTTPRoute CRD the chart's HTTPRoute is checked against. */
const GATEWAY_API_VERSION = 'v1.2.1';

/**
 * The real HTTPRoute CRD of the Gateway API (standard channel), from the Go module
 * sigs.k8s.io/gateway-api, which ships its CRDs as YAML: the Go module proxy serves it here,
 * and Go caches it in its module cache (not in the checkout).
 */
export async function gatewayApiHttpRouteCrd(): Promise<KubeObject> {
  const answer = await run('go', ['mod', 'download', '-json', `sigs.k8s.io/gateway-api@${GATEWAY_API_VERSION}`], { timeout: 5 * 60_000, env: { ...process.env, GOFLAGS: '-mod=mod' } });
  if (answer.code !== 0) throw new Error(`go mod download sigs.k8s.io/gateway-api: ${answer.stderr}`);
  const dir = (JSON.parse(answer.stdout) as { Dir: string }).Dir;
  const text = readFileSync(path.join(dir, 'config/crd/standard/gateway.networking.k8s.io_httproutes.yaml'), 'utf8');
  return parseAllDocuments(text).map((doc) => doc.toJS() as KubeObject).find((object) => object?.kind === 'CustomResourceDefinition')!;
}
