import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { createPoolBody } from '../../api/src/modules/browser-pools/schema.js';
import { createBrowserBody } from '../../api/src/modules/browsers/schema.js';
import { packageRoot } from '../../api/src/paths.js';
import { crdFiles } from '../../operator/src/k8s/crd-files.js';
import { customResourceDefinition, KINDS } from '../../operator/src/k8s/crds.js';
import { camelCase, goPattern, resourceFieldsOf, structuralSchemaOf, wireBodyOf, wireSchemaOf, type JsonSchema } from '../../operator/src/k8s/structural-schema.js';

// The Kubernetes tier applies these files to a real kube-apiserver; here, without one,
// the rules a structural schema must follow are checked directly.

type Crd = { spec: { versions: { schema: { openAPIV3Schema: JsonSchema } }[] } };
const specOf = (crd: Crd) => crd.spec.versions[0]!.schema.openAPIV3Schema.properties!.spec!;

function walk(node: JsonSchema, path: string, visit: (node: JsonSchema, path: string) => void): void {
  visit(node, path);
  for (const [key, child] of Object.entries(node.properties ?? {})) walk(child, `${path}.${key}`, visit);
  if (node.items) walk(node.items, `${path}[]`, visit);
  if (typeof node.additionalProperties === 'object') walk(node.additionalProperties, `${path}.*`, visit);
}

describe('custom resource definitions', () => {
  it('crds/ holds exactly what make crds writes from the zod schemas', () => {
    for (const [name, text] of crdFiles()) {
      const committed = readFileSync(path.join(packageRoot(), 'crds', name), 'utf8');
      expect(committed, `crds/${name} is stale: run make crds`).toBe(text);
    }
  });

  it.each(KINDS.map((kind) => [kind.kind, kind] as const))('%s: the spec names every field of the API request body, camelCased, plus project', (_name, kind) => {
    const wire = wireSchemaOf(kind.wire);
    const spec = specOf(customResourceDefinition(kind) as Crd);
    expect(Object.keys(spec.properties!).sort()).toEqual([...Object.keys(wire.properties!).map(camelCase), 'project'].sort());
    expect(spec.required ?? []).toEqual((wire.required ?? []).map(camelCase));
  });

  it.each(KINDS.map((kind) => [kind.kind, kind] as const))('%s: the schema is structural (a type everywhere, no additionalProperties false, Go patterns)', (_name, kind) => {
    const schema = (customResourceDefinition(kind) as Crd).spec.versions[0]!.schema.openAPIV3Schema;
    const problems: string[] = [];
    walk(schema, '$', (node, at) => {
      if (!node.type && !node['x-kubernetes-preserve-unknown-fields']) problems.push(`${at}: no type`);
      if (node.additionalProperties === false) problems.push(`${at}: additionalProperties false`);
      if (node.anyOf || node.oneOf || node.allOf || node.$ref) problems.push(`${at}: union or reference`);
      if (typeof node.pattern === 'string' && /\\u/.test(node.pattern)) problems.push(`${at}: \\u escape in pattern`);
      if (node.properties && node.additionalProperties) problems.push(`${at}: both properties and additionalProperties`);
    });
    expect(problems).toEqual([]);
  });

  it('leaks no bound that only says "a safe integer" (zod\'s .int()) into a schema', () => {
    for (const file of ['browserpools', 'browsersessions', 'authconnections']) {
      const text = readFileSync(path.join(packageRoot(), 'crds', `${file}.yaml`), 'utf8');
      expect(text).not.toContain(String(Number.MAX_SAFE_INTEGER));
    }
  });

  it('spells code points in patterns as Go reads them and refuses look-around', () => {
    expect(goPattern('^[^\\u0000-\\u001f]*$')).toBe('^[^\\x{0000}-\\x{001f}]*$');
    expect(() => goPattern('^(?!x)')).toThrow(/look-around/);
  });

  it('refuses a union it cannot express instead of writing a schema Kubernetes would reject', () => {
    expect(() => structuralSchemaOf({ anyOf: [{ type: 'string' }, { type: 'integer' }] })).toThrow(/no structural form/);
    expect(structuralSchemaOf({ anyOf: [{ type: 'string', format: 'uri' }, { type: 'string', enum: [''] }] })).toEqual({ type: 'string' });
  });
});

describe('spec ⇄ request body', () => {
  const poolWire = wireSchemaOf(createPoolBody);

  it('turns a BrowserPool spec into a body POST /browser_pools accepts, keeping map keys as written', () => {
    const spec = {
      size: 3,
      fillRatePerMinute: 50,
      kioskMode: true,
      viewport: { width: 800, height: 600, refreshRate: 30 },
      profile: { name: 'shop', saveChanges: false },
      refreshOnProfileUpdate: true,
      chromePolicy: { HomepageLocation: 'https://example.com', BookmarkBarEnabled: true },
      telemetry: { enabled: true, browser: { console: { enabled: false } } },
    };
    const body = wireBodyOf(poolWire, spec);
    expect(body).toEqual({
      size: 3,
      fill_rate_per_minute: 50,
      kiosk_mode: true,
      viewport: { width: 800, height: 600, refresh_rate: 30 },
      profile: { name: 'shop', save_changes: false },
      refresh_on_profile_update: true,
      chrome_policy: { HomepageLocation: 'https://example.com', BookmarkBarEnabled: true },
      telemetry: { enabled: true, browser: { console: { enabled: false } } },
    });
    expect(createPoolBody.safeParse(body).success).toBe(true);
    expect(resourceFieldsOf(poolWire, body)).toEqual(spec);
  });

  it('keeps tag keys that look like snake_case as they are', () => {
    const wire = wireSchemaOf(createBrowserBody);
    const body = wireBodyOf(wire, { timeoutSeconds: 60, tags: { cost_center: 'a', teamName: 'b' } });
    expect(body).toEqual({ timeout_seconds: 60, tags: { cost_center: 'a', teamName: 'b' } });
  });

  it('passes unknown fields through for the API to report', () => {
    const body = wireBodyOf(poolWire, { size: 1, fillRate: 3 });
    expect(body).toEqual({ size: 1, fillRate: 3 });
    expect(createPoolBody.safeParse(body).success).toBe(false);
  });
});
