import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { AGENT_PORT, browserPod } from '../../operator/src/k8s/browser-pod.js';
import { buildJob, DEFAULT_APP_JOB_RESOURCES, runJob } from '../../api/src/modules/apps/app-jobs.js';
import { parseConfig } from '../../api/src/config.js';
import { eventually } from '../support/eventually.js';
import { installCrds, rawRequest } from './support/kube.js';
import { egressAdmits, peersMatching, selects, type NetworkPolicySpec } from './support/network-policy.js';
import {
  CHART,
  KUBE_VERSION,
  ROOT,
  apiRequest,
  canI,
  helm,
  helmBinary,
  parseManifests,
  renderChart,
  serverSideApply,
  serviceMonitorCrd,
  gatewayApiHttpRouteCrd,
  succeeded,
  valuesFile,
  writeKubeconfig,
  type KubeObject,
} from './support/helm.js';

/**
 * The Helm chart against the real test control plane: helm lint, helm template for each
 * values set, every rendered object through a server-side dry-run apply (schema, Strict
 * field validation, admission incl. PodSecurity "restricted"), RBAC judged by the API
 * server's own authorizer, and a real install/upgrade/uninstall.
 */

const SERVICE_MONITOR = 'monitoring.coreos.com/v1/ServiceMonitor';
const VALUES_SETS = {
  default: [],
  'ci/ha-monitoring-values.yaml': [path.join(CHART, 'ci/ha-monitoring-values.yaml')],
  'ci/existing-secrets-values.yaml': [path.join(CHART, 'ci/existing-secrets-values.yaml')],
  'ci/ingress-values.yaml': [path.join(CHART, 'ci/ingress-values.yaml')],
  'ci/s3-storage-values.yaml': [path.join(CHART, 'ci/s3-storage-values.yaml')],
} as const;
type ValuesSet = keyof typeof VALUES_SETS;

/** A namespace that warns on anything PodSecurity's "restricted" profile would refuse. */
async function restrictedNamespace(prefix: string): Promise<string> {
  const name = `${prefix}-${randomBytes(4).toString('hex')}`;
  const labels = { 'pod-security.kubernetes.io/warn': 'restricted', 'pod-security.kubernetes.io/warn-version': 'latest' };
  const created = await apiRequest('POST', '/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name, labels } });
  if (created.status !== 201) throw new Error(`creating namespace ${name}: ${JSON.stringify(created.body)}`);
  return name;
}

const ofKind = (objects: KubeObject[], kind: string) => objects.filter((object) => object.kind === kind);
const named = (objects: KubeObject[], kind: string, name: string) => {
  const found = objects.find((object) => object.kind === kind && object.metadata.name === name);
  if (!found) throw new Error(`no ${kind}/${name} rendered (have ${objects.map((o) => `${o.kind}/${o.metadata.name}`).join(', ')})`);
  return found;
};

interface Container {
  name: string;
  args?: string[];
  env?: { name: string; value?: string; valueFrom?: { secretKeyRef?: { name: string; key: string }; fieldRef?: { fieldPath: string } } }[];
  resources?: { requests?: Record<string, string>; limits?: Record<string, string> };
  livenessProbe?: unknown;
  readinessProbe?: unknown;
  securityContext?: { runAsNonRoot?: boolean; runAsUser?: number; allowPrivilegeEscalation?: boolean; readOnlyRootFilesystem?: boolean; capabilities?: { drop?: string[] } };
}
interface PodSpec {
  securityContext?: { runAsNonRoot?: boolean; runAsUser?: number; seccompProfile?: { type: string } };
  containers: Container[];
  serviceAccountName?: string;
}
const podSpecOf = (workload: KubeObject) => (workload.spec as { template: { spec: PodSpec } }).template.spec;
const envOf = (container: Container, name: string) => container.env?.find((variable) => variable.name === name);

/** The labels of a pod the operator creates (not rendered by the chart: made by browser-pod.ts). */
const browserPodLabels = () =>
  browserPod(
    { browserId: 'bs_labels', orgId: 'org', projectId: 'proj', headless: true, stealth: false, kioskMode: false, viewport: { width: 800, height: 600 }, chromePolicy: {}, labels: { 'browserplane.dev/pool': 'pool_x' } },
    { namespace: 'any', image: 'browserplane/browser:test' },
  ).metadata!.labels!;
/** The labels of the app build and run pods the API creates (app-jobs.ts), not rendered by the chart. */
const appPodLabels = () => {
  const options = { namespace: 'any', image: 'browserplane/runner:test', apiUrl: 'http://api' };
  const build = buildJob({ deploymentId: 'dep_labels', buildTimeoutMs: 60_000 }, options).spec!.template.metadata!.labels!;
  const run = runJob({ invocationId: 'inv_labels', deploymentId: 'dep_labels', appName: 'a', actionName: 'b', timeoutMs: 60_000 }, options).spec!.template.metadata!.labels!;
  return { build, run };
};
const templateLabels = (workload: KubeObject) => (workload.spec as { template: { metadata: { labels: Record<string, string> } } }).template.metadata.labels;
const containerPort = (workload: KubeObject, name: string) =>
  (podSpecOf(workload).containers[0] as Container & { ports: { name: string; containerPort: number }[] }).ports.find((port) => port.name === name)!.containerPort;

interface PolicyRule {
  apiGroups?: string[];
  resources?: string[];
  resourceNames?: string[];
  verbs: string[];
}
const rulesOf = (role: KubeObject) => role.rules as PolicyRule[];

beforeAll(async () => {
  // Built once per machine; the first run on a fresh clone takes minutes here.
  await helmBinary();
  await installCrds();
  const crd = await serverSideApply(serviceMonitorCrd(), { dryRun: false });
  if (crd.status >= 300) throw new Error(`installing the ServiceMonitor CRD: ${JSON.stringify(crd.body)}`);
  const routes = await serverSideApply(await gatewayApiHttpRouteCrd(), { dryRun: false });
  if (routes.status >= 300) throw new Error(`installing the HTTPRoute CRD: ${JSON.stringify(routes.body)}`);
  // The API server serves a new CRD's kind a moment after it is established.
  await eventually(async () => (await rawRequest('GET', '/apis/gateway.networking.k8s.io/v1')).status === 200, { timeoutMs: 30_000, intervalMs: 200, what: 'the HTTPRoute API served', retryErrors: true });
}, 30 * 60_000);

describe('the chart as files', () => {
  it('ships the repository CRDs byte for byte (copy them after `make crds`)', () => {
    const repo = readdirSync(path.join(ROOT, 'crds')).filter((file) => file.endsWith('.yaml')).sort();
    const chart = readdirSync(path.join(CHART, 'crds')).sort();
    expect(chart).toEqual(repo);
    for (const file of repo) {
      expect(readFileSync(path.join(CHART, 'crds', file), 'utf8'), `charts/browserplane/crds/${file} differs from crds/${file}: cp crds/*.yaml charts/browserplane/crds/`).toBe(
        readFileSync(path.join(ROOT, 'crds', file), 'utf8'),
      );
    }
  });

  it('documents every value in values.yaml and README.md and declares it in values.schema.json', () => {
    const schema = JSON.parse(readFileSync(path.join(CHART, 'values.schema.json'), 'utf8')) as SchemaNode;
    const values = parse(readFileSync(path.join(CHART, 'values.yaml'), 'utf8')) as Record<string, unknown>;
    const lines = readFileSync(path.join(CHART, 'values.yaml'), 'utf8').split('\n');
    const undocumented: string[] = [];
    const undeclared: string[] = [];
    const documentedValues: string[] = [];
    // A comment right above a key documents it: "# -- ..." documents a value as a whole
    // (resources, securityContext), a plain "# ..." heads a group whose keys each need one.
    const walk = (node: Record<string, unknown>, schemaNode: SchemaNode | undefined, prefix: string, indent: number, from: number) => {
      for (const [key, value] of Object.entries(node)) {
        const keyPath = prefix ? `${prefix}.${key}` : key;
        const child = schemaNode?.properties?.[key];
        if (!child) undeclared.push(keyPath);
        const at = lines.findIndex((line, index) => index >= from && (line === `${' '.repeat(indent)}${key}:` || line.startsWith(`${' '.repeat(indent)}${key}: `)));
        const comment = at > 0 ? lines[at - 1]!.trim() : '';
        if (!comment.startsWith('#')) undocumented.push(keyPath);
        if (comment.startsWith('# --')) documentedValues.push(keyPath);
        const isGroup = value !== null && typeof value === 'object' && !Array.isArray(value) && !comment.startsWith('# --');
        if (isGroup) walk(value as Record<string, unknown>, child, keyPath, indent + 2, at + 1);
      }
    };
    walk(values, schema, '', 0, 0);
    expect(undeclared).toEqual([]);
    expect(undocumented).toEqual([]);
    const readme = readFileSync(path.join(CHART, 'README.md'), 'utf8');
    expect(documentedValues.length).toBeGreaterThan(50);
    expect(documentedValues.filter((keyPath) => !readme.includes(`| \`${keyPath}\` |`))).toEqual([]);
  });
});

interface SchemaNode {
  properties?: Record<string, SchemaNode>;
}

describe('helm lint --strict', () => {
  it.each(Object.keys(VALUES_SETS) as ValuesSet[])('passes with %s values', async (set) => {
    const args = ['lint', CHART, '--strict', '--kube-version', KUBE_VERSION, ...VALUES_SETS[set].flatMap((file) => ['--values', file])];
    const output = succeeded(await helm(args), `helm ${args.join(' ')}`);
    expect(output).toContain('1 chart(s) linted, 0 chart(s) failed');
  });
});

describe('values.schema.json and the templates refuse bad values', () => {
  const schemaError = (line: string) => new RegExp(`values don't meet the specifications of the schema\\(s\\)[^]*${line.replace(/[[\]()/.*+?^$|\\]/g, '\\$&')}`);
  it.each([
    ['api.replicas as a string', 'api:\n  replicas: three\n', schemaError("- at '/api/replicas': got string, want integer")],
    ['an unknown key', 'api:\n  replica: 3\n', schemaError("- at '/api': additional properties 'replica' not allowed")],
    ['a log level pino does not know', 'operator:\n  logLevel: verbose\n', schemaError("- at '/operator/logLevel': value must be one of")],
    ['an encryption key that is not 32 bytes', 'secrets:\n  encryptionKey: c2hvcnQ=\n', schemaError("- at '/secrets/encryptionKey': 'c2hvcnQ=' does not match pattern")],
    ['an API key shorter than 32 characters', 'secrets:\n  apiKey: short\n', schemaError("- at '/secrets/apiKey': 'short' does not match pattern")],
    ['an app proxy that is not a URL', 'apps:\n  proxy:\n    https: proxy.internal:3128\n', schemaError("- at '/apps/proxy/https': 'proxy.internal:3128' does not match pattern")],
    [
      'an app Job quantity as a number (the API reads the JSON as strings)',
      'apps:\n  run:\n    resources:\n      limits:\n        cpu: 2\n',
      schemaError("- at '/apps/run/resources/limits/cpu': got number, want string"),
    ],
    [
      'an app Job quantity the API does not read (exponent)',
      'apps:\n  build:\n    resources:\n      workSize: "1e3"\n',
      schemaError("- at '/apps/build/resources/workSize': '1e3' does not match pattern"),
    ],
    ['an internal URL without a scheme', 'api:\n  internalUrl: 10.96.0.10\n', schemaError("- at '/api/internalUrl': '10.96.0.10' does not match pattern")],
    ['a DATABASE_URL of another scheme', 'postgresql:\n  enabled: false\ndatabase:\n  url: mysql://db/x\n', schemaError("- at '/database/url': 'mysql://db/x' does not match pattern")],
    ['an external database and the bundled one', 'database:\n  url: postgres://db/x\n', schemaError("- at '/database/url': value must be ''")],
    ['no database source', 'postgresql:\n  enabled: false\n', /set exactly one of database\.url, database\.existingSecret or postgresql\.enabled=true/],
    [
      'a toleration operator Kubernetes does not know',
      'browsers:\n  tolerations: [{key: gpu, operator: Matches}]\n',
      schemaError("- at '/browsers/tolerations/0/operator': value must be one of"),
    ],
    [
      'an address where a range is excepted from browser egress',
      'networkPolicy:\n  browserEgress:\n    exceptCidrs: [169.254.169.254]\n',
      schemaError("- at '/networkPolicy/browserEgress/exceptCidrs/0': '169.254.169.254' does not match pattern"),
    ],
  ])('%s', async (_, content, message) => {
    const result = await helm(['template', 'browserplane', CHART, '--kube-version', KUBE_VERSION, '--values', valuesFile('bad.yaml', content)]);
    expect(result.code, result.stdout).not.toBe(0);
    expect(result.stderr).toMatch(message);
    expect(result.stdout).toBe('');
  });
});

describe.each(Object.keys(VALUES_SETS) as ValuesSet[])('rendered with %s values', (set) => {
  let namespace: string;
  let objects: KubeObject[];

  beforeAll(async () => {
    namespace = await restrictedNamespace('chart');
    objects = await renderChart({ namespace, valuesFiles: [...VALUES_SETS[set]], apiVersions: [SERVICE_MONITOR], includeCrds: true });
  });

  it('is accepted object by object by a server-side dry-run apply, without PodSecurity warnings', async () => {
    expect(objects.length).toBeGreaterThan(10);
    expect(ofKind(objects, 'CustomResourceDefinition')).toHaveLength(3);
    // Only the HA set asks for one; it meets the minimal ServiceMonitor CRD installed above.
    expect(ofKind(objects, 'ServiceMonitor')).toHaveLength(set === 'ci/ha-monitoring-values.yaml' ? 1 : 0);
    const refused: string[] = [];
    const warned: string[] = [];
    for (const object of objects) {
      const answer = await serverSideApply(object, { dryRun: true });
      const id = `${object.kind}/${object.metadata.name}`;
      if (answer.status >= 300) refused.push(`${id}: ${String(answer.body.message)}`);
      for (const warning of answer.warnings) warned.push(`${id}: ${warning}`);
    }
    expect(refused).toEqual([]);
    expect(warned).toEqual([]);
  });

  it('runs every container as non-root, read-only, without privileges, with resources and probes', () => {
    const workloads = [...ofKind(objects, 'Deployment'), ...ofKind(objects, 'StatefulSet')];
    expect(workloads.length).toBeGreaterThanOrEqual(2);
    for (const workload of workloads) {
      const pod = podSpecOf(workload);
      for (const container of pod.containers) {
        const where = `${workload.kind}/${workload.metadata.name} container ${container.name}`;
        expect(container.securityContext?.runAsNonRoot ?? pod.securityContext?.runAsNonRoot, where).toBe(true);
        expect(container.securityContext?.runAsUser ?? pod.securityContext?.runAsUser, where).toBeGreaterThan(0);
        expect(container.securityContext?.allowPrivilegeEscalation, where).toBe(false);
        expect(container.securityContext?.readOnlyRootFilesystem, where).toBe(true);
        expect(container.securityContext?.capabilities?.drop, where).toEqual(['ALL']);
        expect(pod.securityContext?.seccompProfile?.type, where).toBe('RuntimeDefault');
        expect(container.resources?.requests?.cpu, where).toBeTruthy();
        expect(container.resources?.requests?.memory, where).toBeTruthy();
        expect(container.resources?.limits?.memory, where).toBeTruthy();
        expect(container.livenessProbe, where).toBeTruthy();
        expect(container.readinessProbe, where).toBeTruthy();
      }
    }
  });

  it('grants least privilege: namespaced Roles only, no wildcards, no pods for the API', () => {
    expect(ofKind(objects, 'ClusterRole')).toEqual([]);
    expect(ofKind(objects, 'ClusterRoleBinding')).toEqual([]);
    const roles = ofKind(objects, 'Role');
    expect(roles.map((role) => role.metadata.name).sort()).toEqual(['browserplane-api', 'browserplane-operator']);
    for (const role of roles) {
      for (const rule of rulesOf(role)) {
        expect([...(rule.apiGroups ?? []), ...(rule.resources ?? []), ...rule.verbs], role.metadata.name).not.toContain('*');
      }
    }
    const apiRules = rulesOf(named(objects, 'Role', 'browserplane-api'));
    expect(apiRules.flatMap((rule) => rule.resources ?? [])).not.toContain('pods');
    // Outside its own group the API may only write and delete (never read) the launch Secrets.
    // and run the app runtime's Jobs (which carry their token Secrets).
    const apiCoreRules = apiRules.filter((rule) => !rule.apiGroups?.every((group) => group === 'browserplane.dev'));
    expect(apiCoreRules).toEqual([
      { apiGroups: [''], resources: ['secrets'], verbs: ['create', 'delete'] },
      { apiGroups: ['batch'], resources: ['jobs'], verbs: ['get', 'list', 'watch', 'create', 'delete'] },
    ]);
    // Leases: create (cannot be limited by name), everything else only on the operator's own.
    const operatorRules = rulesOf(named(objects, 'Role', 'browserplane-operator'));
    const leaseRules = operatorRules.filter((rule) => rule.resources?.includes('leases'));
    expect(leaseRules.filter((rule) => !rule.resourceNames).flatMap((rule) => rule.verbs)).toEqual(['create']);
    const operator = podSpecOf(named(objects, 'Deployment', 'browserplane-operator')).containers[0]!;
    expect(leaseRules.flatMap((rule) => rule.resourceNames ?? [])).toEqual([envOf(operator, 'BROWSERPLANE_OPERATOR_LEASE')?.value]);
    expect(envOf(operator, 'BROWSERPLANE_OPERATOR_LEASE')?.value).toBe('browserplane-operator');
  });

  it('wires both processes to the same Secrets and the API image entry points', () => {
    const api = podSpecOf(named(objects, 'Deployment', 'browserplane-api')).containers[0]!;
    const operator = podSpecOf(named(objects, 'Deployment', 'browserplane-operator')).containers[0]!;
    expect(api.args).toEqual(['dist/api/src/main.js']);
    expect(operator.args).toEqual(['dist/operator/src/main.js']);
    for (const variable of ['DATABASE_URL', 'BROWSERPLANE_ENCRYPTION_KEY']) {
      expect(envOf(api, variable)?.valueFrom?.secretKeyRef, variable).toEqual(envOf(operator, variable)?.valueFrom?.secretKeyRef);
    }
    expect(envOf(operator, 'BROWSERPLANE_API_KEY')).toBeUndefined();
    // The API runs browsers as BrowserSessions, and their pods reach it through its Service.
    expect(envOf(api, 'BROWSERPLANE_RUNTIME')?.value).toBe('kubernetes');
    expect(envOf(api, 'POD_NAMESPACE')?.valueFrom?.fieldRef?.fieldPath).toBe('metadata.namespace');
    expect(envOf(api, 'BROWSERPLANE_INTERNAL_URL')?.value).toMatch(new RegExp(`^http://browserplane-api\\.${namespace}\\.svc:\\d+$`));
    // Apps: Jobs of the runner image (the chart's appVersion by default), with the API's own resource defaults.
    expect(envOf(api, 'BROWSERPLANE_APP_RUNNER_IMAGE')?.value).toMatch(/^browserplane\/runner:\d+\.\d+\.\d+/);
    expect(envOf(api, 'BROWSERPLANE_APP_RUNNER_PULL_POLICY')?.value).toBe('IfNotPresent');
    expect(JSON.parse(envOf(api, 'BROWSERPLANE_APP_BUILD_RESOURCES')!.value!)).toEqual(DEFAULT_APP_JOB_RESOURCES.build);
    expect(JSON.parse(envOf(api, 'BROWSERPLANE_APP_RUN_RESOURCES')!.value!)).toEqual(DEFAULT_APP_JOB_RESOURCES.run);
    for (const variable of ['BROWSERPLANE_APP_HTTP_PROXY', 'BROWSERPLANE_APP_HTTPS_PROXY', 'BROWSERPLANE_APP_NO_PROXY', 'BROWSERPLANE_APP_CA_CONFIGMAP']) expect(envOf(api, variable), variable).toBeUndefined();
    // Every Secret a pod reads is either rendered here or one the values name as existing.
    const rendered = new Set(ofKind(objects, 'Secret').map((secret) => secret.metadata.name));
    const existingBySet: Partial<Record<ValuesSet, string[]>> = { 'ci/existing-secrets-values.yaml': ['browserplane-keys', 'platform-postgres'], 'ci/s3-storage-values.yaml': ['browserplane-s3'] };
    const existing = new Set(existingBySet[set] ?? []);
    for (const container of [api, operator]) {
      for (const variable of container.env ?? []) {
        const ref = variable.valueFrom?.secretKeyRef;
        if (ref) expect(rendered.has(ref.name) || existing.has(ref.name), `${container.name} ${variable.name} -> ${ref.name}`).toBe(true);
      }
    }
    expect([...existing].filter((name) => rendered.has(name))).toEqual([]);
  });

  // The CNI that would enforce these cannot run here (no kubelet networking): the policies
  // are judged against the labels and ports of the pods they are about, so a renamed label
  // or a moved port fails here instead of silently cutting browsers off in a cluster.
  it('lets only the API and operator pods into browser pods, on the agent port, and browsers out to DNS, the API and the public internet', () => {
    const api = named(objects, 'Deployment', 'browserplane-api');
    const operator = named(objects, 'Deployment', 'browserplane-operator');
    const postgres = ofKind(objects, 'StatefulSet')[0];
    const pods: Record<string, Record<string, string>> = {
      api: templateLabels(api),
      operator: templateLabels(operator),
      browser: browserPodLabels(),
      ...(postgres ? { postgresql: templateLabels(postgres) } : {}),
    };
    expect(ofKind(objects, 'NetworkPolicy').map((policy) => policy.metadata.name).sort()).toEqual(
      ['browserplane-api', 'browserplane-apps', 'browserplane-browsers', ...(postgres ? ['browserplane-postgresql'] : [])].sort(),
    );
    const browsers = named(objects, 'NetworkPolicy', 'browserplane-browsers').spec as NetworkPolicySpec;
    expect(Object.keys(pods).filter((pod) => selects(browsers.podSelector, pods[pod]!))).toEqual(['browser']);
    expect(browsers.policyTypes).toEqual(['Ingress', 'Egress']);
    expect(browsers.ingress).toHaveLength(1);
    expect(peersMatching(browsers.ingress![0]!.from!, pods)).toEqual(['api', 'operator']);
    expect(browsers.ingress![0]!.ports).toEqual([{ port: AGENT_PORT, protocol: 'TCP' }]);

    const egress = browsers.egress!;
    const toApi = egress.filter((rule) => rule.to?.some((peer) => peer.podSelector));
    expect(toApi).toHaveLength(1);
    expect(peersMatching(toApi[0]!.to!, pods)).toEqual(['api']);
    expect(toApi[0]!.ports).toEqual([{ port: containerPort(api, 'http'), protocol: 'TCP' }]);
    expect(egress.filter((rule) => !rule.to)).toEqual([{ ports: [{ port: 53, protocol: 'UDP' }, { port: 53, protocol: 'TCP' }] }]);
    // Public addresses yes; the metadata service, the test cluster's service range and the
    // other private ranges no, except what a values file opened on purpose.
    for (const port of [80, 443]) expect(egressAdmits(egress, '93.184.216.34', port)).toBe(true);
    for (const address of ['169.254.169.254', '10.0.0.1', '172.16.0.10', '192.168.1.1', '100.64.0.1']) expect(egressAdmits(egress, address, 443), address).toBe(false);
    const proxyOpened = set === 'ci/existing-secrets-values.yaml';
    expect(egressAdmits(egress, '10.20.3.4', 3128)).toBe(proxyOpened);
    expect(egressAdmits(egress, '10.20.3.4', 443)).toBe(false);
  });

  it('lets nothing into app build and run pods, and them out to DNS, the API and the public internet', () => {
    const api = named(objects, 'Deployment', 'browserplane-api');
    const { build, run } = appPodLabels();
    const pods: Record<string, Record<string, string>> = {
      api: templateLabels(api),
      operator: templateLabels(named(objects, 'Deployment', 'browserplane-operator')),
      browser: browserPodLabels(),
      build,
      run,
    };
    const apps = named(objects, 'NetworkPolicy', 'browserplane-apps').spec as NetworkPolicySpec;
    expect(Object.keys(pods).filter((pod) => selects(apps.podSelector, pods[pod]!))).toEqual(['build', 'run']);
    const browsers = named(objects, 'NetworkPolicy', 'browserplane-browsers').spec as NetworkPolicySpec;
    expect(selects(browsers.podSelector, build) || selects(browsers.podSelector, run)).toBe(false);
    expect(apps.policyTypes).toEqual(['Ingress', 'Egress']);
    expect(apps.ingress ?? []).toEqual([]);
    const egress = apps.egress!;
    const toApi = egress.filter((rule) => rule.to?.some((peer) => peer.podSelector));
    expect(toApi).toHaveLength(1);
    expect(peersMatching(toApi[0]!.to!, pods)).toEqual(['api']);
    expect(toApi[0]!.ports).toEqual([{ port: containerPort(api, 'http'), protocol: 'TCP' }]);
    expect(egress.filter((rule) => !rule.to)).toEqual([{ ports: [{ port: 53, protocol: 'UDP' }, { port: 53, protocol: 'TCP' }] }]);
    for (const port of [80, 443]) expect(egressAdmits(egress, '151.101.0.223', port)).toBe(true);
    for (const address of ['169.254.169.254', '10.0.0.1', '172.16.0.10', '192.168.1.1', '100.64.0.1']) expect(egressAdmits(egress, address, 443), address).toBe(false);
    // The API's own policy takes them on its HTTP port (it takes anyone there).
    const apiPolicy = named(objects, 'NetworkPolicy', 'browserplane-api').spec as NetworkPolicySpec;
    expect(apiPolicy.ingress).toEqual([{ ports: [{ port: containerPort(api, 'http'), protocol: 'TCP' }] }]);
  });

  it('lets only the API and operator pods reach the bundled Postgres, and anyone the API on its HTTP port', () => {
    const api = named(objects, 'Deployment', 'browserplane-api');
    const postgres = ofKind(objects, 'StatefulSet')[0];
    const pods: Record<string, Record<string, string>> = {
      api: templateLabels(api),
      operator: templateLabels(named(objects, 'Deployment', 'browserplane-operator')),
      browser: browserPodLabels(),
      ...(postgres ? { postgresql: templateLabels(postgres) } : {}),
    };
    const apiPolicy = named(objects, 'NetworkPolicy', 'browserplane-api').spec as NetworkPolicySpec;
    expect(Object.keys(pods).filter((pod) => selects(apiPolicy.podSelector, pods[pod]!))).toEqual(['api']);
    expect(apiPolicy.ingress).toEqual([{ ports: [{ port: containerPort(api, 'http'), protocol: 'TCP' }] }]);
    if (!postgres) return;
    const database = named(objects, 'NetworkPolicy', 'browserplane-postgresql').spec as NetworkPolicySpec;
    expect(Object.keys(pods).filter((pod) => selects(database.podSelector, pods[pod]!))).toEqual(['postgresql']);
    expect(database.policyTypes).toEqual(['Ingress']);
    expect(database.ingress).toHaveLength(1);
    expect(peersMatching(database.ingress![0]!.from!, pods)).toEqual(['api', 'operator']);
    expect(database.ingress![0]!.ports).toEqual([{ port: containerPort(postgres, 'postgresql'), protocol: 'TCP' }]);
  });

  it('renders PodDisruptionBudgets exactly for the components with more than one replica', () => {
    const replicasOf = (name: string) => (named(objects, 'Deployment', name).spec as { replicas: number }).replicas;
    const expected = ['browserplane-api', 'browserplane-operator'].filter((name) => replicasOf(name) > 1);
    expect(ofKind(objects, 'PodDisruptionBudget').map((pdb) => pdb.metadata.name).sort()).toEqual(expected);
  });
});

describe('rendering choices', () => {
  it('renders the ServiceMonitor only when asked for and when the cluster serves its CRD', async () => {
    const namespace = 'render-only';
    const withCrd = await renderChart({ namespace, set: ['metrics.serviceMonitor.enabled=true'], apiVersions: [SERVICE_MONITOR] });
    const withoutCrd = await renderChart({ namespace, set: ['metrics.serviceMonitor.enabled=true'] });
    const notAsked = await renderChart({ namespace, apiVersions: [SERVICE_MONITOR] });
    expect(ofKind(withCrd, 'ServiceMonitor')).toHaveLength(1);
    expect(ofKind(withoutCrd, 'ServiceMonitor')).toEqual([]);
    expect(ofKind(notAsked, 'ServiceMonitor')).toEqual([]);
  });

  it('passes the app runtime settings to the API: internal URL, proxy, CA ConfigMap, resources, or apps off', async () => {
    const apiEnv = async (set: string[]) => {
      const container = podSpecOf(named(await renderChart({ namespace: 'render-only', set }), 'Deployment', 'browserplane-api')).containers[0]!;
      return (name: string) => envOf(container, name)?.value;
    };
    const env = await apiEnv([
      'api.internalUrl=http://10.96.0.42',
      'apps.proxy.http=http://proxy.internal:3128',
      'apps.proxy.https=http://proxy.internal:3129',
      'apps.proxy.noProxy=.internal\\,10.0.0.0/8',
      'apps.caConfigMap=egress-ca',
      'apps.runner.image.repository=registry.example.com/runner',
      'apps.runner.image.tag=1.2.3',
      'apps.runner.image.pullPolicy=Never',
      'apps.run.resources.limits.memory=3Gi',
      'imagePullSecrets[0].name=regcred',
      'apps.nodeSelector.pool=apps',
      'apps.tolerations[0].key=apps',
      'apps.tolerations[0].operator=Exists',
      'apps.tolerations[0].effect=NoSchedule',
      'apps.runtimeClassName=gvisor',
    ]);
    expect(env('BROWSERPLANE_INTERNAL_URL')).toBe('http://10.96.0.42');
    expect(env('BROWSERPLANE_APP_RUNNER_IMAGE')).toBe('registry.example.com/runner:1.2.3');
    expect(env('BROWSERPLANE_APP_RUNNER_PULL_POLICY')).toBe('Never');
    expect(env('BROWSERPLANE_APP_HTTP_PROXY')).toBe('http://proxy.internal:3128');
    expect(env('BROWSERPLANE_APP_HTTPS_PROXY')).toBe('http://proxy.internal:3129');
    expect(env('BROWSERPLANE_APP_NO_PROXY')).toBe('.internal,10.0.0.0/8');
    expect(env('BROWSERPLANE_APP_CA_CONFIGMAP')).toBe('egress-ca');
    // One key overridden; the rest of the defaults merge in.
    expect(JSON.parse(env('BROWSERPLANE_APP_RUN_RESOURCES')!)).toEqual({ ...DEFAULT_APP_JOB_RESOURCES.run, limits: { ...DEFAULT_APP_JOB_RESOURCES.run.limits, memory: '3Gi' } });
    // Placement as the API's own setting parses it, and as the Jobs then carry it.
    const placement = parseConfig({ BROWSERPLANE_APP_POD_PLACEMENT: env('BROWSERPLANE_APP_POD_PLACEMENT') }).BROWSERPLANE_APP_POD_PLACEMENT;
    expect(placement).toEqual({ imagePullSecrets: [{ name: 'regcred' }], nodeSelector: { pool: 'apps' }, tolerations: [{ key: 'apps', operator: 'Exists', effect: 'NoSchedule' }], runtimeClassName: 'gvisor', priorityClassName: '' });
    const pod = buildJob({ deploymentId: 'dep_1', buildTimeoutMs: 1000 }, { namespace: 'ns', image: 'r', apiUrl: 'http://api', ...placement }).spec!.template.spec!;
    expect(pod).toMatchObject({ imagePullSecrets: [{ name: 'regcred' }], nodeSelector: { pool: 'apps' }, runtimeClassName: 'gvisor' });
    const off = await apiEnv(['apps.runner.image.repository=']);
    expect(off('BROWSERPLANE_APP_RUNNER_IMAGE')).toBeUndefined();
    expect(off('BROWSERPLANE_APP_RUNNER_PULL_POLICY')).toBeUndefined();
  });

  it('spreads API replicas over nodes and zones, softly, unless told otherwise; one replica gets no spread', async () => {
    const apiPod = async (set: string[]) => podSpecOf(named(await renderChart({ namespace: 'render-only', set }), 'Deployment', 'browserplane-api')) as PodSpec & { topologySpreadConstraints?: { topologyKey: string; whenUnsatisfiable: string; maxSkew: number; labelSelector: { matchLabels: Record<string, string> } }[] };
    const spread = (await apiPod(['api.replicas=3'])).topologySpreadConstraints!;
    expect(spread.map((c) => c.topologyKey)).toEqual(['kubernetes.io/hostname', 'topology.kubernetes.io/zone']);
    const apiLabels = templateLabels(named(await renderChart({ namespace: 'render-only' }), 'Deployment', 'browserplane-api'));
    for (const constraint of spread) {
      expect(constraint).toMatchObject({ maxSkew: 1, whenUnsatisfiable: 'ScheduleAnyway' });
      // It selects the API's own pods, and only those.
      expect(Object.entries(constraint.labelSelector.matchLabels).every(([key, value]) => apiLabels[key] === value)).toBe(true);
      expect(constraint.labelSelector.matchLabels['app.kubernetes.io/component']).toBe('api');
    }
    expect((await apiPod(['api.replicas=1'])).topologySpreadConstraints).toBeUndefined();
    const own = await apiPod(['api.topologySpreadConstraints[0].maxSkew=2', 'api.topologySpreadConstraints[0].topologyKey=rack', 'api.topologySpreadConstraints[0].whenUnsatisfiable=DoNotSchedule']);
    expect(own.topologySpreadConstraints).toEqual([{ maxSkew: 2, topologyKey: 'rack', whenUnsatisfiable: 'DoNotSchedule' }]);
  });

  it('gives API, browser and app pods the PriorityClass each is set to, and none by default', async () => {
    const render = async (set: string[]) => {
      const objects = await renderChart({ namespace: 'render-only', set });
      const operatorEnv = podSpecOf(named(objects, 'Deployment', 'browserplane-operator')).containers[0]!;
      const apiPod = podSpecOf(named(objects, 'Deployment', 'browserplane-api')) as PodSpec & { priorityClassName?: string };
      // As the operator's setting holds it, and as the browser pod then carries it.
      const settings = JSON.parse(envOf(operatorEnv, 'BROWSERPLANE_BROWSER_POD')!.value!) as Omit<Parameters<typeof browserPod>[1], 'namespace'>;
      const browser = browserPod({ browserId: 'bs_p', orgId: 'o', projectId: 'p', headless: true, stealth: false, kioskMode: false, viewport: { width: 800, height: 600 }, chromePolicy: {}, labels: {} }, { namespace: 'any', ...settings }).spec!;
      const placement = parseConfig({ BROWSERPLANE_APP_POD_PLACEMENT: envOf(apiPod.containers[0]!, 'BROWSERPLANE_APP_POD_PLACEMENT')?.value }).BROWSERPLANE_APP_POD_PLACEMENT;
      const app = buildJob({ deploymentId: 'dep_1', buildTimeoutMs: 1000 }, { namespace: 'ns', image: 'r', apiUrl: 'http://api', ...placement }).spec!.template.spec!;
      return { api: apiPod.priorityClassName, browser: browser.priorityClassName, app: app.priorityClassName };
    };
    expect(await render([])).toEqual({ api: undefined, browser: undefined, app: undefined });
    expect(await render(['api.priorityClassName=api-high', 'browsers.priorityClassName=browsers-low', 'apps.priorityClassName=apps-low'])).toEqual({ api: 'api-high', browser: 'browsers-low', app: 'apps-low' });
  });

  it('names its home, sources and an icon that the repository holds', () => {
    const chart = parse(readFileSync(path.join(CHART, 'Chart.yaml'), 'utf8')) as { home: string; sources: string[]; icon: string };
    expect(chart.home).toMatch(/^https:\/\//);
    expect(chart.sources.length).toBeGreaterThan(0);
    const icon = /\/main\/(.+)$/.exec(chart.icon)![1]!;
    expect(readFileSync(path.join(CHART, '..', '..', icon), 'utf8')).toContain('<svg');
  });

  it('puts the API behind an Ingress that keeps streams open, with TLS, and names its host as the public URL', async () => {
    const objects = await renderChart({ namespace: 'render-only', valuesFiles: [path.join(CHART, 'ci/ingress-values.yaml')], set: ['ingress.annotations.nginx\\.ingress\\.kubernetes\\.io/proxy-body-size=1g'] });
    const [ingress] = ofKind(objects, 'Ingress');
    const spec = ingress!.spec as { ingressClassName: string; tls: unknown[]; rules: { host: string; http: { paths: { path: string; backend: { service: { name: string; port: { name: string } } } }[] } }[] };
    expect(spec.ingressClassName).toBe('nginx');
    expect(spec.tls).toEqual([{ secretName: 'browserplane-tls', hosts: ['browsers.example.com'] }]);
    expect(spec.rules.map((rule) => rule.host)).toEqual(['browsers.example.com']);
    // To the API Service's port by name.
    const service = named(objects, 'Service', 'browserplane-api');
    const backend = spec.rules[0]!.http.paths[0]!.backend.service;
    expect(backend.name).toBe(service.metadata.name);
    expect((service.spec as { ports: { name: string }[] }).ports.map((port) => port.name)).toContain(backend.port.name);
    expect(ingress!.metadata.annotations).toMatchObject({
      'cert-manager.io/cluster-issuer': 'letsencrypt',
      'nginx.ingress.kubernetes.io/proxy-read-timeout': '3600',
      'nginx.ingress.kubernetes.io/proxy-send-timeout': '3600',
      'nginx.ingress.kubernetes.io/proxy-buffering': 'off',
      // A value given wins over the chart's default.
      'nginx.ingress.kubernetes.io/proxy-body-size': '1g',
    });
    const api = podSpecOf(named(objects, 'Deployment', 'browserplane-api')).containers[0]!;
    expect(envOf(api, 'BROWSERPLANE_PUBLIC_URL')?.value).toBe('https://browsers.example.com');
    const plain = await renderChart({ namespace: 'render-only', set: ['ingress.enabled=true', 'ingress.hosts[0]=b.example.com'] });
    expect(envOf(podSpecOf(named(plain, 'Deployment', 'browserplane-api')).containers[0]!, 'BROWSERPLANE_PUBLIC_URL')?.value).toBe('http://b.example.com');
    const given = await renderChart({ namespace: 'render-only', set: ['ingress.enabled=true', 'ingress.hosts[0]=b.example.com', 'api.publicUrl=https://other.example.com'] });
    expect(envOf(podSpecOf(named(given, 'Deployment', 'browserplane-api')).containers[0]!, 'BROWSERPLANE_PUBLIC_URL')?.value).toBe('https://other.example.com');
    expect(ofKind(await renderChart({ namespace: 'render-only' }), 'Ingress')).toEqual([]);
  });

  it('routes a Gateway\'s listener to the API with no request timeout, and refuses a route with no Gateway', async () => {
    const [route] = ofKind(await renderChart({ namespace: 'render-only', valuesFiles: [path.join(CHART, 'ci/ingress-values.yaml')] }), 'HTTPRoute');
    expect(route!.spec).toMatchObject({
      parentRefs: [{ name: 'public', namespace: 'gateways', sectionName: 'https' }],
      hostnames: ['browsers.example.com'],
      rules: [{ backendRefs: [{ name: 'browserplane-api', port: 80 }], timeouts: { request: '0s' } }],
    });
    const refused = await helm(['template', 'x', CHART, '--set', 'httpRoute.enabled=true']);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain('httpRoute.parentRefs');
  });

  it('mounts the database CA Secret read-only into the API and operator pods, only when named', async () => {
    type Mounted = PodSpec & { volumes: { name: string; secret?: { secretName: string } }[] };
    const mounts = async (set: string[]) => {
      const objects = await renderChart({ namespace: 'render-only', set });
      return ['browserplane-api', 'browserplane-operator'].map((name) => {
        const pod = podSpecOf(named(objects, 'Deployment', name)) as Mounted;
        const mount = (pod.containers[0] as Container & { volumeMounts: { name: string; mountPath: string; readOnly?: boolean }[] }).volumeMounts.find((m) => m.name === 'database-ca');
        return { mount, volume: pod.volumes.find((v) => v.name === 'database-ca') };
      });
    };
    for (const { mount, volume } of await mounts(['database.caSecret=db-ca'])) {
      expect(mount).toEqual({ name: 'database-ca', mountPath: '/etc/browserplane/database-ca', readOnly: true });
      expect(volume).toEqual({ name: 'database-ca', secret: { secretName: 'db-ca' } });
    }
    for (const { mount, volume } of await mounts([])) expect({ mount, volume }).toEqual({ mount: undefined, volume: undefined });
  });

  it('stores profiles and recordings in the S3 bucket storage.s3 names, with no shared volume, and refuses s3 without a bucket', async () => {
    type Volumes = { volumes?: { name: string }[]; containers: (Container & { volumeMounts?: { name: string }[] })[] };
    const apiOf = async (options: { valuesFiles?: string[] }) => podSpecOf(named(await renderChart({ namespace: 'render-only', ...options }), 'Deployment', 'browserplane-api')) as PodSpec & Volumes;
    const s3 = await apiOf({ valuesFiles: [path.join(CHART, 'ci/s3-storage-values.yaml')] });
    const api = s3.containers[0]!;
    expect(Object.fromEntries(['BROWSERPLANE_STORE', 'BROWSERPLANE_S3_BUCKET', 'BROWSERPLANE_S3_ENDPOINT', 'BROWSERPLANE_S3_REGION', 'BROWSERPLANE_S3_PREFIX', 'BROWSERPLANE_S3_FORCE_PATH_STYLE'].map((name) => [name, envOf(api, name)?.value]))).toEqual({
      BROWSERPLANE_STORE: 's3',
      BROWSERPLANE_S3_BUCKET: 'browserplane-data',
      BROWSERPLANE_S3_ENDPOINT: 'http://minio.minio.svc:9000',
      BROWSERPLANE_S3_REGION: 'us-east-1',
      BROWSERPLANE_S3_PREFIX: 'browserplane/',
      BROWSERPLANE_S3_FORCE_PATH_STYLE: 'true',
    });
    expect(envOf(api, 'AWS_ACCESS_KEY_ID')?.valueFrom?.secretKeyRef).toEqual({ name: 'browserplane-s3', key: 'AWS_ACCESS_KEY_ID' });
    expect(envOf(api, 'AWS_SECRET_ACCESS_KEY')?.valueFrom?.secretKeyRef).toEqual({ name: 'browserplane-s3', key: 'AWS_SECRET_ACCESS_KEY' });
    expect(envOf(api, 'BROWSERPLANE_PROFILE_DIR')).toBeUndefined();
    expect(s3.volumes!.map((volume) => volume.name)).not.toContain('profiles');
    expect(api.volumeMounts!.map((mount) => mount.name)).not.toContain('replays');
    const file = await apiOf({});
    expect(envOf(file.containers[0]!, 'BROWSERPLANE_STORE')).toBeUndefined();
    expect(file.volumes!.map((volume) => volume.name)).toEqual(expect.arrayContaining(['profiles', 'replays']));
    const refused = await helm(['template', 'x', CHART, '--set', 'storage.type=s3']);
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain('bucket');
  });

  it('renders no NetworkPolicy when networkPolicy.enabled is false', async () => {
    expect(ofKind(await renderChart({ namespace: 'render-only', set: ['networkPolicy.enabled=false'] }), 'NetworkPolicy')).toEqual([]);
  });

  it('generates a 32-byte encryption key and a long API key, or uses the ones given', async () => {
    const secretOf = async (set: string[] = []) => {
      const secret = named(await renderChart({ namespace: 'render-only', set }), 'Secret', 'browserplane');
      const data = secret.data as Record<string, string>;
      return Object.fromEntries(Object.entries(data).map(([key, value]) => [key, Buffer.from(value, 'base64').toString('utf8')]));
    };
    const generated = await secretOf();
    expect(Buffer.from(generated['encryption-key']!, 'base64')).toHaveLength(32);
    expect(generated['api-key']).toMatch(/^[A-Za-z0-9]{48}$/);
    expect((await secretOf())['encryption-key']).not.toBe(generated['encryption-key']);
    const key = randomBytes(32).toString('hex');
    const given = await secretOf([`secrets.encryptionKey=${key}`, 'secrets.apiKey=bp_0123456789abcdef0123456789abcdef']);
    expect(given['encryption-key']).toBe(key);
    expect(given['api-key']).toBe('bp_0123456789abcdef0123456789abcdef');
  });
});

describe('a real helm install, upgrade and uninstall on the test control plane', () => {
  it('keeps generated secrets across an upgrade, and the Secret and the CRDs after uninstall', async () => {
    const namespace = await restrictedNamespace('helm');
    const kubeconfig = writeKubeconfig();
    const common = ['--namespace', namespace, '--kubeconfig', kubeconfig];
    const readSecret = async (name: string) => {
      const answer = await apiRequest('GET', `/api/v1/namespaces/${namespace}/secrets/${name}`);
      return answer.status === 200 ? (answer.body.data as Record<string, string>) : undefined;
    };

    const install = await helm(['install', 'browserplane', CHART, ...common]);
    succeeded(install, 'helm install');
    expect(install.stderr).not.toMatch(/violate PodSecurity/);
    // NOTES.txt rendered with the release's names.
    expect(install.stdout).toContain(`kubectl -n ${namespace} get secret browserplane -o jsonpath='{.data.api-key}'`);
    const first = await readSecret('browserplane');
    const firstPostgres = await readSecret('browserplane-postgresql');
    expect(Object.keys(first ?? {}).sort()).toEqual(['api-key', 'encryption-key']);

    succeeded(await helm(['upgrade', 'browserplane', CHART, ...common, '--set', 'api.replicas=3']), 'helm upgrade');
    expect(await readSecret('browserplane')).toEqual(first);
    expect(await readSecret('browserplane-postgresql')).toEqual(firstPostgres);
    const api = await apiRequest('GET', `/apis/apps/v1/namespaces/${namespace}/deployments/browserplane-api`);
    expect((api.body.spec as { replicas: number }).replicas).toBe(3);

    // The API server's own authorizer judges the installed RBAC.
    const operatorSa = `system:serviceaccount:${namespace}:browserplane-operator`;
    const apiSa = `system:serviceaccount:${namespace}:browserplane-api`;
    const pool = { group: 'browserplane.dev', resource: 'browserpools' };
    expect(await canI(operatorSa, { namespace, verb: 'create', resource: 'pods' })).toBe(true);
    expect(await canI(operatorSa, { namespace, verb: 'update', ...pool, subresource: 'status' })).toBe(true);
    expect(await canI(operatorSa, { namespace, verb: 'update', group: 'coordination.k8s.io', resource: 'leases', name: 'browserplane-operator' })).toBe(true);
    expect(await canI(operatorSa, { namespace, verb: 'update', group: 'coordination.k8s.io', resource: 'leases', name: 'someone-else' })).toBe(false);
    // Launch specs travel in Secrets of the release namespace (the operator copies each into its pod's), nowhere else.
    expect(await canI(operatorSa, { namespace, verb: 'watch', resource: 'secrets' })).toBe(true);
    expect(await canI(operatorSa, { namespace: 'kube-system', verb: 'get', resource: 'secrets' })).toBe(false);
    expect(await canI(operatorSa, { namespace, verb: 'create', ...pool })).toBe(false);
    expect(await canI(operatorSa, { namespace: 'kube-system', verb: 'list', resource: 'pods' })).toBe(false);
    expect(await canI(apiSa, { namespace, verb: 'create', ...pool })).toBe(true);
    expect(await canI(apiSa, { namespace, verb: 'delete', group: 'browserplane.dev', resource: 'browsersessions' })).toBe(true);
    expect(await canI(apiSa, { namespace, verb: 'update', ...pool, subresource: 'status' })).toBe(false);
    expect(await canI(apiSa, { namespace, verb: 'list', resource: 'pods' })).toBe(false);
    expect(await canI(apiSa, { namespace, verb: 'get', resource: 'secrets' })).toBe(false);
    const session = { group: 'browserplane.dev', resource: 'browsersessions' };
    for (const verb of ['create', 'get', 'list', 'watch']) expect(await canI(apiSa, { namespace, verb, ...session }), verb).toBe(true);
    expect(await canI(apiSa, { namespace, verb: 'update', ...session })).toBe(false);
    expect(await canI(apiSa, { namespace, verb: 'create', resource: 'secrets' })).toBe(true);
    expect(await canI(apiSa, { namespace, verb: 'delete', resource: 'secrets' })).toBe(true);
    expect(await canI(apiSa, { namespace, verb: 'list', resource: 'secrets' })).toBe(false);
    expect(await canI(apiSa, { namespace: 'kube-system', verb: 'create', resource: 'secrets' })).toBe(false);
    // App build and run Jobs, in the release namespace only, never changed in place.
    const jobs = { group: 'batch', resource: 'jobs' };
    for (const verb of ['create', 'get', 'list', 'watch', 'delete']) expect(await canI(apiSa, { namespace, verb, ...jobs }), `jobs ${verb}`).toBe(true);
    expect(await canI(apiSa, { namespace, verb: 'update', ...jobs })).toBe(false);
    expect(await canI(apiSa, { namespace: 'kube-system', verb: 'create', ...jobs })).toBe(false);
    expect(await canI(operatorSa, { namespace, verb: 'create', ...jobs })).toBe(false);

    succeeded(await helm(['uninstall', 'browserplane', ...common]), 'helm uninstall');
    expect(await readSecret('browserplane')).toEqual(first);
    expect((await apiRequest('GET', `/apis/apps/v1/namespaces/${namespace}/deployments/browserplane-api`)).status).toBe(404);
    for (const crd of ['browserpools', 'browsersessions', 'authconnections']) {
      expect((await apiRequest('GET', `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${crd}.browserplane.dev`)).status).toBe(200);
    }
  });
});

describe('examples/browserpool.yaml', () => {
  it('is accepted by a dry-run create with Strict field validation', async () => {
    const namespace = await restrictedNamespace('example');
    const [pool] = parseManifests(readFileSync(path.join(CHART, 'examples/browserpool.yaml'), 'utf8'));
    expect(pool?.kind).toBe('BrowserPool');
    const created = await apiRequest(
      'POST',
      `/apis/browserplane.dev/v1alpha1/namespaces/${namespace}/browserpools?dryRun=All&fieldValidation=Strict`,
      pool,
    );
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    expect(created.warnings).toEqual([]);
    expect((created.body.spec as { size: number }).size).toBe(3);
  });
});

describe('examples/authconnection.yaml', () => {
  it('is accepted by a dry-run create with Strict field validation', async () => {
    const namespace = await restrictedNamespace('example-auth');
    const [connection] = parseManifests(readFileSync(path.join(CHART, 'examples/authconnection.yaml'), 'utf8'));
    expect(connection?.kind).toBe('AuthConnection');
    const created = await apiRequest(
      'POST',
      `/apis/browserplane.dev/v1alpha1/namespaces/${namespace}/authconnections?dryRun=All&fieldValidation=Strict`,
      connection,
    );
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    expect(created.warnings).toEqual([]);
    expect(created.body.spec).toMatchObject({ domain: 'crm.example.com', profileName: 'crm', credential: { name: 'crm-login' } });
  });
});
