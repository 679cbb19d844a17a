/**
 * Turns the API's zod request schemas into Kubernetes *structural* OpenAPI v3 schemas for
 * custom resources, and converts resource specs back into API request bodies, so a
 * BrowserPool applied with kubectl is validated by the same rules as POST /browser_pools
 * (CRD schema at admission, the zod schema again when the operator reconciles it).
 *
 * Kubernetes conventions differ from the Kernel wire format in two ways handled here:
 * - field names are camelCase in manifests (`fillRatePerMinute`), snake_case on the wire
 *   (`fill_rate_per_minute`); keys of maps (tags, Chrome policies) are data and keep their
 *   spelling;
 * - a structural schema names a type at every level, never says `additionalProperties:
 *   false` (the API server prunes or, with strict field validation, rejects unknown
 *   fields instead), and keeps free-form values under `x-kubernetes-preserve-unknown-fields`.
 * Patterns are checked by Go's regexp (RE2), which spells code points `\x{…}`, not `\u…`.
 */
import { z } from 'zod';

export type JsonSchema = {
  type?: string;
  properties?: Record<string, JsonSchema>;
  required?: string[];
  additionalProperties?: boolean | JsonSchema;
  items?: JsonSchema;
  anyOf?: JsonSchema[];
  oneOf?: JsonSchema[];
  allOf?: JsonSchema[];
  $ref?: string;
  definitions?: Record<string, JsonSchema>;
  pattern?: string;
  maximum?: number;
  minimum?: number;
  description?: string;
  nullable?: boolean;
  enum?: unknown[];
  const?: unknown;
  'x-kubernetes-preserve-unknown-fields'?: boolean;
  'x-kubernetes-validations'?: { rule: string; message: string }[];
  [keyword: string]: unknown;
};

/** snake_case → camelCase (`fill_rate_per_minute` → `fillRatePerMinute`). */
export function camelCase(name: string): string {
  return name.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase());
}

/** The zod schema's input side as OpenAPI 3.0 JSON Schema with every $ref inlined. */
export function wireSchemaOf(schema: z.ZodType): JsonSchema {
  const document = z.toJSONSchema(schema, { target: 'openapi-3.0', io: 'input', unrepresentable: 'any' }) as JsonSchema;
  const definitions = document.definitions ?? {};
  const inline = (node: JsonSchema, seen: string[]): JsonSchema => {
    if (node.$ref) {
      const name = node.$ref.replace('#/definitions/', '');
      if (seen.includes(name)) throw new Error(`recursive schema ${name} cannot become a CRD schema`);
      const target = definitions[name];
      if (!target) throw new Error(`unresolved $ref ${node.$ref}`);
      const { $ref: _ref, ...rest } = node;
      return inline({ ...target, ...rest }, [...seen, name]);
    }
    const out: JsonSchema = {};
    for (const [key, value] of Object.entries(node)) {
      if (key === 'definitions' || key === '$schema' || key === 'id') continue;
      if (key === 'properties') {
        out.properties = Object.fromEntries(Object.entries(value as Record<string, JsonSchema>).map(([k, v]) => [k, inline(v, seen)]));
      } else if ((key === 'items' || key === 'additionalProperties') && typeof value === 'object' && value !== null) {
        out[key] = inline(value as JsonSchema, seen);
      } else if ((key === 'anyOf' || key === 'oneOf' || key === 'allOf') && Array.isArray(value)) {
        out[key] = (value as JsonSchema[]).map((v) => inline(v, seen));
      } else {
        out[key] = value;
      }
    }
    return out;
  };
  return inline(document, []);
}

/** A map (record) schema: free keys, nothing named. Its keys are data, never renamed. */
function isMap(node: JsonSchema): boolean {
  return node.type === 'object' && !node.properties && node.additionalProperties !== undefined && node.additionalProperties !== false;
}

/** `[^\u0000-\u001f]` → `[^\x{0000}-\x{001f}]`, the spelling Go's regexp reads. */
export function goPattern(pattern: string): string {
  if (/\(\?[=!<]/.test(pattern)) throw new Error(`pattern ${pattern} uses look-around, which Go's regexp cannot run`);
  return pattern.replace(/\\u\{?([0-9a-fA-F]{4,6})\}?/g, '\\x{$1}');
}

/** The structural, camelCase schema Kubernetes stores for a wire (snake_case) schema. */
export function structuralSchemaOf(wire: JsonSchema, path = '$'): JsonSchema {
  const node: JsonSchema = { ...wire };
  for (const union of ['anyOf', 'oneOf'] as const) {
    const branches = node[union];
    if (!branches) continue;
    // `x | ""` style unions of one type collapse to that type; anything else has no
    // structural form and must be expressed another way.
    const types = new Set(branches.map((branch) => branch.type));
    if (types.size !== 1 || [...types][0] === undefined || [...types][0] === 'object') {
      throw new Error(`${path}: a union of ${[...types].join(', ')} has no structural form`);
    }
    delete node[union];
    node.type = [...types][0];
  }
  if (node.allOf) throw new Error(`${path}: allOf has no structural form here`);
  if (node.const !== undefined) {
    node.enum = [node.const];
    delete node.const;
  }
  if (typeof node.pattern === 'string') node.pattern = goPattern(node.pattern);
  // zod's .int() says "a safe integer" as these bounds: no bound at all in a CRD.
  if (node.maximum === Number.MAX_SAFE_INTEGER) delete node.maximum;
  if (node.minimum === Number.MIN_SAFE_INTEGER) delete node.minimum;
  if (node.additionalProperties === false) delete node.additionalProperties;

  if (isMap(node)) {
    const values = node.additionalProperties as JsonSchema | true;
    if (values === true || values.type === undefined) {
      // Free-form values (Chrome policies): kept as sent, checked by the API's own rules.
      delete node.additionalProperties;
      node['x-kubernetes-preserve-unknown-fields'] = true;
    } else {
      node.additionalProperties = structuralSchemaOf(values, `${path}.*`);
    }
    return node;
  }
  if (node.properties) {
    node.properties = Object.fromEntries(
      Object.entries(node.properties).map(([key, value]) => [camelCase(key), structuralSchemaOf(value, `${path}.${key}`)]),
    );
    if (node.required) node.required = node.required.map(camelCase);
  }
  if (node.items) node.items = structuralSchemaOf(node.items, `${path}[]`);
  if (node.type === undefined) throw new Error(`${path}: no type; a structural schema needs one at every level`);
  return node;
}

/**
 * Converts a custom resource's spec (camelCase) into the API's request body (snake_case),
 * guided by the wire schema so map keys stay as written and unknown fields pass through
 * untouched for the API's own validation to report.
 */
export function wireBodyOf(wire: JsonSchema, value: unknown): unknown {
  if (Array.isArray(value)) return wire.items ? value.map((item) => wireBodyOf(wire.items!, item)) : value;
  if (value === null || typeof value !== 'object') return value;
  const properties = wire.properties ?? wire.anyOf?.find((branch) => branch.properties)?.properties;
  if (!properties) return value;
  const byCamel = new Map(Object.keys(properties).map((key) => [camelCase(key), key]));
  return Object.fromEntries(
    Object.entries(value as Record<string, unknown>).map(([key, inner]) => {
      const wireKey = byCamel.get(key);
      return wireKey === undefined ? [key, inner] : [wireKey, wireBodyOf(properties[wireKey]!, inner)];
    }),
  );
}

/** The reverse of wireBodyOf: an API body (or response fields) in a resource's spelling. */
export function resourceFieldsOf(wire: JsonSchema, value: unknown): unknown {
  if (Array.isArray(value)) return wire.items ? value.map((item) => resourceFieldsOf(wire.items!, item)) : value;
  if (value === null || typeof value !== 'object') return value;
  const properties = wire.properties ?? wire.anyOf?.find((branch) => branch.properties)?.properties;
  if (!properties) return value;
  return Object.fromEntries(
    Object.entries(value as Record<string, unknown>).map(([key, inner]) => {
      const schema = properties[key];
      return schema ? [camelCase(key), resourceFieldsOf(schema, inner)] : [key, inner];
    }),
  );
}
