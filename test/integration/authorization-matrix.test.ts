import { performance } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FixedClock } from '../../api/src/clock.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { FakeAgent, FakeRuntime, useRuntime } from './browsers.fixtures.js';
import { alphaChanges, arrangeAlpha, identities, snapshotRows, type Alpha, type Expect, type Identity } from './authorization-matrix.fixtures.js';
import { ghostOf, ghostProbe, operationObject, probesOf, securedOperations, type Doc, type Operation, type Probe } from './authorization-matrix.operations.js';

/*
 * Issue 8's authorisation matrix: every operation of /openapi.json that needs a key,
 * sent with every identity that is not tenant A acting in its default project, naming
 * A's resources. Each is refused (or acts only on its own scope), the refusal is a
 * clean `{code, message, details}` that shows nothing of A's, and A's rows are the same
 * afterwards. A stand-in runtime: no route here needs a browser to answer.
 */

const clock = new FixedClock(new Date('2026-09-01T08:00:00.000Z'));
/** Columns a refused request may legitimately touch: none so far. */
const VOLATILE_COLUMNS: string[] = [];
let app: TestApp;
let agent: FakeAgent;
let alpha: Alpha;
let who: Identity[];
let doc: Doc;
let operations: Operation[];

beforeAll(async () => {
  app = await startTestApp({ clock });
  agent = new FakeAgent();
  useRuntime(app, new FakeRuntime(await agent.listen()));
  alpha = await arrangeAlpha(app, clock);
  who = await identities(app, alpha);
  doc = (await app.client().get<Doc>('/openapi.json')).body;
  operations = securedOperations(doc);
});
afterAll(async () => {
  await app?.close();
  await agent?.close();
});

interface Sent {
  status: number;
  headers: Headers;
  text: string;
  body: any;
  ms: number;
}

async function send(probe: Pick<Probe, 'operation' | 'url' | 'body'>, headers: Record<string, string>): Promise<Sent> {
  const all: Record<string, string> = { ...headers };
  let payload: string | FormData | undefined;
  if (probe.body !== undefined) {
    if (probe.operation.bodyKind === 'multipart') {
      const form = new FormData();
      form.append('file', new Blob(['matrix']), 'matrix.txt');
      form.append('dest_path', '/tmp/matrix.txt');
      payload = form;
    } else if (probe.operation.bodyKind === 'raw') {
      all['content-type'] = 'application/octet-stream';
      payload = typeof probe.body === 'string' ? probe.body : JSON.stringify(probe.body);
    } else {
      all['content-type'] = 'application/json';
      payload = JSON.stringify(probe.body);
    }
  }
  const started = performance.now();
  const res = await fetch(app.url + probe.url, { method: probe.operation.method, headers: all, signal: AbortSignal.timeout(10_000), ...(payload ? { body: payload } : {}) });
  const text = await res.text();
  const ms = performance.now() - started;
  let body: any = text;
  if ((res.headers.get('content-type') ?? '').includes('json') && text) body = JSON.parse(text);
  return { status: res.status, headers: res.headers, text, body, ms };
}

/** A's ids, names and secrets in a response that the request did not itself carry. */
function leaked(res: Sent, probe: Probe, identity: Identity): string[] {
  const asked = `${probe.url} ${JSON.stringify(probe.body ?? '')} ${JSON.stringify(identity.headers)}`;
  return alpha.secrets.filter((s) => res.text.includes(s) && !asked.includes(s));
}

/** Why a response breaks what the identity must get; undefined when it is right. */
function verdict(res: Sent, expected: Expect): string | undefined {
  if ('ownScope' in expected) return res.status >= 500 ? `got ${res.status}` : undefined;
  const statusOk = expected.refused === 'absent' ? res.status === 404 || res.status === 400 : res.status === expected.refused;
  if (!statusOk) return `expected ${expected.refused}, got ${res.status}`;
  const shape = res.body as { code?: unknown; message?: unknown; details?: unknown };
  if (typeof shape?.code !== 'string' || typeof shape.message !== 'string' || !Array.isArray(shape.details)) return 'not an error body';
  if (expected.refused === 401) {
    if (shape.code !== 'unauthorized') return `code ${String(shape.code)}`;
    if (res.headers.get('www-authenticate') !== 'Bearer') return 'no www-authenticate: Bearer';
  } else if ('code' in expected && shape.code !== expected.code) return `expected code ${expected.code}, got ${String(shape.code)}`;
  return undefined;
}

/**
 * A refusal must not tell "A has it" from "nobody has it": the answer naming A's resource
 * equals the answer naming its twin that exists nowhere, once the twin is swapped back.
 */
async function sameAsNowhere(probe: Probe, res: Sent, identity: Identity): Promise<string | undefined> {
  const { probe: ghost, swaps } = ghostProbe(probe, alpha);
  if (!swaps.length) return 'names none of A’s values';
  const twin = await send(ghost, identity.headers);
  const back = swaps.reduce((text, [real, fake]) => text.split(fake).join(real), twin.text);
  return twin.status === res.status && back === res.text ? undefined : `differs from a resource that exists nowhere: ${twin.status} ${twin.text.slice(0, 160)}`;
}

const expectationFor = (identity: Identity, probe: Probe): Expect | null =>
  probe.operation.scope === 'org' ? identity.onOrgRoute(probe.naming) : identity.onProjectRoute(probe.naming);

// Thousands of requests per case (every operation × every identity): a case takes ~20 s on
// an idle 2-core machine and well over the tier's 30 s default under load.
describe('authorisation matrix over every operation of /openapi.json', { timeout: 300_000 }, () => {
  it('refuses every identity but A on A’s resources, with a clean error that shows nothing of A’s, and changes none of A’s rows', async () => {
    const before = await snapshotRows(app.database.db, VOLATILE_COLUMNS);
    const failures: string[] = [];
    let checked = 0;
    let twins = 0;
    // Bodies are made afresh for every identity: names that must be unique stay unique.
    const probesFor = () => operations.flatMap((op) => probesOf(op, doc, alpha));
    const requests = probesFor().length;
    for (const identity of who) {
      for (const probe of probesFor()) {
        const expected = expectationFor(identity, probe);
        if (!expected) continue;
        const res = await send(probe, identity.headers);
        checked++;
        const where = `${probe.operation.method} ${probe.operation.path} (${probe.operation.operationId}, ${probe.label}) as ${identity.label}`;
        const wrong = verdict(res, expected);
        if (wrong) failures.push(`${where}: ${wrong}: ${res.text.slice(0, 200)}`);
        if (!wrong && probe.naming && 'refused' in expected && expected.refused !== 401) {
          twins++;
          const differs = await sameAsNowhere(probe, res, identity);
          if (differs) failures.push(`${where}: ${differs}`);
        }
        const leaks = leaked(res, probe, identity);
        if (leaks.length) failures.push(`${where}: shows ${leaks.join(', ')}`);
      }
    }
    const changes = alphaChanges(before, await snapshotRows(app.database.db, VOLATILE_COLUMNS), alpha);
    console.log(
      `authorisation matrix: ${operations.length} operations as ${requests} requests × ${who.length} identities: ${checked} requests checked, ${twins} refusals compared with a resource that exists nowhere`,
    );
    expect(operations.length).toBeGreaterThan(80);
    expect(failures).toEqual([]);
    expect(changes).toEqual([]);
  });

  it('lists nothing of A’s to another org or project, also when filtering by A’s ids and names', async () => {
    const before = await snapshotRows(app.database.db, VOLATILE_COLUMNS);
    const NOT_FILTERS = new Set(['limit', 'offset', 'status', 'include_deleted', 'sort_by', 'sort_direction', 'since', 'type', 'tags']);
    const values = alpha.secrets.filter((v) => !v.includes('password'));
    const failures: string[] = [];
    let checked = 0;
    let listed = 0;
    for (const op of operations.filter((o) => o.method === 'GET' && !o.path.includes('{'))) {
      const params = (operationObject(doc, op).parameters ?? []).filter((p) => p.in === 'query');
      if (!params.some((p) => p.name === 'limit')) continue;
      // Deleted items too, where the list can show them.
      const wide = params.some((p) => p.name === 'status' && p.schema?.enum?.includes('all'))
        ? 'status=all&'
        : params.some((p) => p.name === 'include_deleted')
          ? 'include_deleted=true&'
          : '';
      const queries = [
        '',
        ...params.filter((p) => !NOT_FILTERS.has(p.name)).flatMap((p) => values.map((v) => `${p.name}=${encodeURIComponent(v)}`)),
        ...(params.some((p) => p.name === 'tags') ? ['tags[owner]=alpha-tag'] : []),
      ];
      for (const identity of who) {
        if (!('ownScope' in ((op.scope === 'org' ? identity.onOrgRoute(null) : identity.onProjectRoute(null)) ?? {}))) continue;
        for (const query of queries) {
          const probe: Probe = { operation: op, label: query, url: `${op.path}?${wide}limit=100&${query}`, naming: null };
          const res = await send(probe, identity.headers);
          checked++;
          // A value a filter cannot take (an id as a domain) is a 400 that shows nothing either.
          const shown = leaked(res, probe, identity);
          const answered = (res.status === 200 && Array.isArray(res.body)) || (res.status === 400 && res.body?.code === 'invalid_request');
          if (res.status === 200) listed++;
          if (!answered || shown.length) {
            failures.push(`${op.operationId}?${query} as ${identity.label}: ${res.status} shows [${shown.join(', ')}] ${res.text.slice(0, 160)}`);
          }
        }
      }
    }
    console.log(`list filters: ${checked} filtered lists by other orgs and projects (${listed} answered 200), none showing A`);
    expect(listed).toBeGreaterThan(500);
    expect(failures).toEqual([]);
    expect(alphaChanges(before, await snapshotRows(app.database.db, VOLATILE_COLUMNS), alpha)).toEqual([]);
  });

  it('answers a name that exists in another tenant byte for byte like a name that exists nowhere (timings printed)', async () => {
    const bravo = who.find((i) => i.label === 'key of org B')!;
    const SAMPLES = 200;
    for (const prefix of ['/profiles', '/credentials', '/browsers', '/browser_pools']) {
      const real = alpha.resources[prefix]!.name!;
      const ghost = ghostOf(real);
      const timings = { real: [] as number[], ghost: [] as number[] };
      const shapes = new Set<string>();
      const operation: Operation = { operationId: 'byName', method: 'GET', path: prefix, scope: 'project', bodyKind: null };
      for (let i = 0; i < SAMPLES; i++) {
        // Interleaved, so drift on this shared machine falls on both sides alike.
        for (const [side, name] of [['real', real], ['ghost', ghost]] as const) {
          const res = await send({ operation, url: `${prefix}/${name}` }, bravo.headers);
          timings[side].push(res.ms);
          const headers = [...res.headers].filter(([h]) => !['date', 'x-request-id'].includes(h));
          shapes.add(JSON.stringify([res.status, headers, res.text.split(name).join('{name}')]));
        }
      }
      expect([...shapes].map((x) => (JSON.parse(x) as unknown[])[0])).toEqual([404]);
      expect(shapes.size, [...shapes].join('\n')).toBe(1);
      const real50 = quantile(timings.real, 0.5);
      const ghost50 = quantile(timings.ghost, 0.5);
      console.log(
        `lookup by name ${prefix}/{name} as org B, ${SAMPLES} each: exists in A median ${real50.toFixed(3)} ms p90 ${quantile(timings.real, 0.9).toFixed(3)} ms; ` +
          `exists nowhere median ${ghost50.toFixed(3)} ms p90 ${quantile(timings.ghost, 0.9).toFixed(3)} ms; median ratio ${(real50 / ghost50).toFixed(3)}`,
      );
    }
  });
});

function quantile(values: number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}
