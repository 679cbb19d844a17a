import type { Alpha, Naming } from './authorization-matrix.fixtures.js';

/**
 * The operations of /openapi.json as requests that name tenant A's resources. Driven
 * by the document, so a new route under a known path prefix is covered without edits;
 * a path parameter nobody knows how to fill fails the test instead of being skipped.
 */

/** The parts of JSON Schema and OpenAPI 3.1 this file reads. */
interface Schema {
  $ref?: string;
  type?: string;
  const?: unknown;
  enum?: unknown[];
  oneOf?: Schema[];
  anyOf?: Schema[];
  required?: string[];
  properties?: Record<string, Schema>;
  items?: Schema;
  minItems?: number;
  minimum?: number;
  minLength?: number;
}
export interface Parameter {
  in: string;
  name: string;
  required?: boolean;
  schema?: Schema;
}
interface OperationObject {
  operationId: string;
  security?: unknown[];
  parameters?: Parameter[];
  requestBody?: { content: Record<string, { schema?: Schema }> };
}
export interface Doc {
  paths: Record<string, Record<string, OperationObject>>;
  components?: { schemas?: Record<string, Schema> };
}

/** The OpenAPI operation object behind an operation. */
export const operationObject = (doc: Doc, operation: Pick<Operation, 'path' | 'method'>): OperationObject =>
  doc.paths[operation.path]![operation.method.toLowerCase()]!;

export interface Operation {
  operationId: string;
  method: string;
  path: string;
  scope: 'org' | 'project';
  bodyKind: 'json' | 'raw' | 'multipart' | null;
}

export interface Probe {
  operation: Operation;
  /** What this request names, for the report. */
  label: string;
  url: string;
  body?: unknown;
  /** Where the request names one of A's resources. */
  naming: Naming;
}

/** Every operation that needs a key. */
export function securedOperations(doc: Doc): Operation[] {
  const out: Operation[] = [];
  for (const [path, methods] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(methods)) {
      if (Array.isArray(op.security) && op.security.length === 0) continue;
      const headers = (op.parameters ?? []).filter((p) => p.in === 'header').map((p) => p.name.toLowerCase());
      const content = Object.keys(op.requestBody?.content ?? {});
      out.push({
        operationId: op.operationId,
        method: method.toUpperCase(),
        path,
        scope: headers.includes('x-kernel-project-id') ? 'project' : 'org',
        bodyKind: content.includes('application/json')
          ? 'json'
          : content.includes('multipart/form-data')
            ? 'multipart'
            : content.length
              ? 'raw'
              : null,
      });
    }
  }
  return out;
}

let seq = 0;
const fresh = (prefix: string) => `${prefix}-${++seq}`;

/** Bodies valid for tenant A where the schema's required fields are not enough. */
const BODIES: Record<string, () => unknown> = {
  createApiKey: () => ({ name: fresh('matrix-key') }),
  createProject: () => ({ name: fresh('matrix-project') }),
  createProxy: () => ({ type: 'custom', name: fresh('matrix-proxy'), config: { host: 'proxy.matrix.test', port: 3128 } }),
  createCredential: () => ({ name: fresh('matrix-credential'), domain: 'matrix.test', values: { username: 'u' } }),
  createAuthConnection: () => ({ domain: 'matrix.test', profile_name: fresh('matrix-profile'), health_checks: false }),
  createInvocation: () => ({ app_name: 'matrix-app', action_name: 'run', version: '1', async: true }),
  updateInvocation: () => ({ status: 'running' }),
  updateApiKey: () => ({ name: 'renamed' }),
  updateProxy: () => ({ name: 'renamed' }),
  updateProfile: () => ({ name: 'renamed' }),
  updateProject: () => ({ name: 'renamed' }),
  updateProjectLegacy: () => ({ name: 'renamed' }),
  releaseBrowserPool: () => ({ session_id: 'bs_unknown' }),
  computerPressKey: () => ({ keys: ['a'] }),
  computerDragMouse: () => ({ path: [[0, 0], [10, 10]] }),
  computerBatch: () => ({ actions: [{ type: 'move_mouse', move_mouse: { x: 1, y: 1 } }] }),
  browserFsSetFilePermissions: () => ({ path: '/tmp/matrix.txt', mode: '644' }),
  browserFsMove: () => ({ src_path: '/tmp/matrix.txt', dest_path: '/tmp/matrix-2.txt' }),
  browserCurl: () => ({ url: 'http://matrix.test/' }),
};

/** Requests that act in the caller's own scope but name A's resources in the body. */
function bodiesNamingAlpha(operationId: string, alpha: Alpha): [string, unknown][] {
  const r = alpha.resources;
  const proxy = r['/proxies']!;
  const profile = r['/profiles']!;
  const credential = r['/credentials']!;
  const login = () => ({ domain: 'matrix.test', profile_name: fresh('matrix-profile'), health_checks: false });
  const table: Record<string, [string, unknown][]> = {
    createApiKey: [["A's project", { name: fresh('matrix-key'), project_id: alpha.tenant.defaultProjectId }]],
    createBrowser: [
      ["A's proxy", { proxy_id: proxy.id }],
      ["A's profile by id", { profile: { id: profile.id } }],
      ["A's profile by name", { profile: { name: profile.name } }],
      ["A's invocation", { invocation_id: r['/invocations']!.id }],
    ],
    createBrowserPool: [
      ["A's proxy", { size: 1, proxy_id: proxy.id }],
      ["A's profile by id", { size: 1, profile: { id: profile.id } }],
      ["A's profile by name", { size: 1, profile: { name: profile.name } }],
    ],
    createAuthConnection: [
      ["A's credential by name", { ...login(), credential: { name: credential.name } }],
      ["A's credential by id", { ...login(), credential: { name: credential.id } }],
      ["A's proxy by id", { ...login(), proxy: { id: proxy.id } }],
      ["A's proxy by name", { ...login(), proxy: { name: 'alpha-proxy' } }],
    ],
  };
  return table[operationId] ?? [];
}

/** The smallest value the schema accepts, from its required fields. */
function minimal(schema: Schema | undefined, doc: Doc, name = ''): unknown {
  let s = schema ?? {};
  if (s.$ref) s = doc.components?.schemas?.[s.$ref.split('/').pop()!] ?? {};
  const choice = s.oneOf ?? s.anyOf;
  if (choice) return minimal(choice.find((c) => c.type !== 'null'), doc, name);
  if (s.const !== undefined) return s.const;
  if (s.enum) return s.enum[0];
  // Paths in a browser's file system must be absolute.
  if (s.type === 'string' && name.endsWith('path')) return '/tmp/matrix.txt';
  switch (s.type) {
    case 'object':
      return Object.fromEntries((s.required ?? []).map((k) => [k, minimal(s.properties?.[k], doc, k)]));
    case 'array':
      return s.minItems ? [minimal(s.items, doc)] : [];
    case 'integer':
    case 'number':
      return s.minimum ?? 1;
    case 'boolean':
      return false;
    default:
      return 'a'.repeat(Math.max(1, s.minLength ?? 1));
  }
}

function jsonBodyOf(operation: Operation, doc: Doc): unknown {
  const hand = BODIES[operation.operationId];
  if (hand) return hand();
  return minimal(operationObject(doc, operation).requestBody?.content['application/json']?.schema, doc);
}

/** Required query parameters, with values valid for the route. */
function queryOf(operation: Operation, doc: Doc): string {
  const required = (operationObject(doc, operation).parameters ?? []).filter((p) => p.in === 'query' && p.required);
  const values = required.map((p): [string, string] => {
    const value = minimal(p.schema, doc, p.name);
    return [p.name, typeof value === 'string' ? value : JSON.stringify(value)];
  });
  return values.length ? `?${new URLSearchParams(values).toString()}` : '';
}

/** A's resource behind a path: the longest known prefix. */
function ownerOf(path: string, alpha: Alpha) {
  const prefix = Object.keys(alpha.resources)
    .filter((p) => path === p || path.startsWith(`${p}/`))
    .sort((a, b) => b.length - a.length)[0];
  return prefix ? alpha.resources[prefix] : undefined;
}

/** The requests to send for one operation: by A's id, by A's name where it takes one, and body references. */
export function probesOf(operation: Operation, doc: Doc, alpha: Alpha): Probe[] {
  const names = [...operation.path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]!);
  const body = operation.bodyKind === 'json' ? jsonBodyOf(operation, doc) : operation.bodyKind ? 'matrix' : undefined;
  const query = queryOf(operation, doc);
  const make = (label: string, values: Record<string, string>, naming: Naming, withBody = body): Probe => ({
    operation,
    label,
    url: operation.path.replace(/\{([^}]+)\}/g, (_, n: string) => encodeURIComponent(values[n]!)) + query,
    ...(withBody !== undefined ? { body: withBody } : {}),
    naming,
  });
  if (names.length === 0) {
    return [make('own scope', {}, null), ...bodiesNamingAlpha(operation.operationId, alpha).map(([label, b]) => make(label, {}, 'body', b))];
  }
  const owner = ownerOf(operation.path, alpha);
  const fill = (by: 'id' | 'name'): Record<string, string> =>
    Object.fromEntries(
      names.map((n) => {
        if (n === 'watch_id') return [n, 'matrix-watch'];
        // A process id is the agent's; only the browser in front of it says whose it is.
        if (n === 'process_id') return [n, '00000000-0000-4000-8000-000000000000'];
        if (n === 'replay_id') return [n, alpha.replayId];
        if ((n === 'id' || n === 'id_or_name') && owner) return [n, by === 'name' ? owner.name! : owner.id];
        throw new Error(`no value of tenant A for {${n}} in ${operation.method} ${operation.path}: add it to the fixtures`);
      }),
    );
  const probes = [make("A's id", fill('id'), 'path')];
  if (names.includes('id_or_name') && owner?.name) probes.push(make("A's name", fill('name'), 'path'));
  return probes;
}

/** A letter-for-letter twin of an id or name that exists nowhere: same length, same prefix. */
export function ghostOf(value: string): string {
  const cut = value.lastIndexOf('_') + 1;
  return value.slice(0, cut) + value.slice(cut).replace(/[a-z]/g, (c) => String.fromCharCode(((c.charCodeAt(0) - 97 + 13) % 26) + 97));
}

/** The same request naming, instead of A's resources, ones that exist nowhere. */
export function ghostProbe(probe: Probe, alpha: Alpha): { probe: Probe; swaps: [string, string][] } {
  const swaps: [string, string][] = [];
  let url = probe.url;
  let body = probe.body === undefined ? undefined : JSON.stringify(probe.body);
  for (const secret of [...alpha.secrets].sort((a, b) => b.length - a.length)) {
    if (!url.includes(secret) && !body?.includes(secret)) continue;
    const ghost = ghostOf(secret);
    swaps.push([secret, ghost]);
    url = url.split(secret).join(ghost);
    body = body?.split(secret).join(ghost);
  }
  return { probe: { ...probe, url, ...(body !== undefined ? { body: JSON.parse(body) } : {}) }, swaps };
}
