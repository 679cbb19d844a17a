/**
 * The three CustomResourceDefinitions (group browserplane.dev, version v1alpha1), built
 * from the API's own zod request schemas so a manifest and a POST body obey the same
 * rules. `make crds` writes them to crds/; a unit test fails when the committed files and
 * this module disagree, and the Kubernetes tier applies them to a real API server.
 *
 * Each resource's spec is the API's create body in Kubernetes spelling plus `project`;
 * rules JSON Schema cannot state (exactly one of id or name, a profile needed for
 * refreshOnProfileUpdate) are CEL validations, checked by the API server at admission.
 * Names and status schemas are each kind's own, from contract/kinds.
 */
import type { z } from 'zod';
import { createConnectionBody } from '../../../api/src/modules/auth-connections/index.js';
import { createPoolBody } from '../../../api/src/modules/browser-pools/index.js';
import { createBrowserBody } from '../../../api/src/modules/browsers/index.js';
import { structuralSchemaOf, wireSchemaOf, type JsonSchema } from './structural-schema.js';
import {
  API_VERSION,
  AUTH_CONNECTION,
  authConnectionStatusSchema,
  BROWSER_POOL,
  BROWSER_SESSION,
  browserPoolStatusSchema,
  browserSessionStatusSchema,
  GROUP,
  VERSION,
  type KindNames,
} from '../../../contract/kinds.js';

export { API_VERSION, GROUP, VERSION };

const project = {
  type: 'string',
  minLength: 1,
  maxLength: 255,
  description: 'The project (name or id) the resource belongs to; the default project when omitted',
} satisfies JsonSchema;

const exactlyOneOfIdOrName = { rule: 'has(self.id) != has(self.name)', message: 'give exactly one of id or name' };

export interface KindDefinition extends KindNames {
  /** The API request body the spec mirrors. */
  wire: z.ZodType;
  /** The kind's status schema (contract/kinds/<kind>.ts). */
  status: z.ZodType;
  /** CEL rules by path in the structural spec ('' = the spec itself). */
  validations: Record<string, { rule: string; message: string }[]>;
  printerColumns: { name: string; type: string; jsonPath: string; description: string; priority?: number }[];
  /** The scale subresource (kubectl scale, an HPA, KEDA): where the replica count and the pods' selector live. */
  scale?: { specReplicasPath: string; statusReplicasPath: string; labelSelectorPath: string };
}

const ready = { name: 'Ready', type: 'string', jsonPath: '.status.conditions[?(@.type=="Ready")].status', description: 'Ready condition' };
const age = { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp', description: 'Time since creation' };

export const KINDS: KindDefinition[] = [
  {
    ...BROWSER_POOL,
    shortNames: [...BROWSER_POOL.shortNames],
    wire: createPoolBody,
    status: browserPoolStatusSchema,
    validations: {
      '': [
        {
          rule: '!has(self.refreshOnProfileUpdate) || !self.refreshOnProfileUpdate || has(self.profile)',
          message: 'refreshOnProfileUpdate needs a profile',
        },
      ],
      profile: [exactlyOneOfIdOrName],
    },
    // An HPA or KEDA sizes the pool through /scale: spec.size is its replica count.
    scale: { specReplicasPath: '.spec.size', statusReplicasPath: '.status.replicas', labelSelectorPath: '.status.selector' },
    printerColumns: [
      { name: 'Size', type: 'integer', jsonPath: '.spec.size', description: 'Browsers kept warm' },
      { name: 'Available', type: 'integer', jsonPath: '.status.availableCount', description: 'Idle browsers' },
      { name: 'Acquired', type: 'integer', jsonPath: '.status.acquiredCount', description: 'Leased browsers' },
      { name: 'Starting', type: 'integer', jsonPath: '.status.startingCount', description: 'Browsers still starting', priority: 1 },
      ready,
      age,
    ],
  },
  {
    ...BROWSER_SESSION,
    shortNames: [...BROWSER_SESSION.shortNames],
    wire: createBrowserBody,
    status: browserSessionStatusSchema,
    validations: {
      '': [
        { rule: '!has(self.gpu) || !self.gpu', message: 'no GPU is available on this installation; omit gpu or send false' },
        { rule: '!has(self.extensions) || size(self.extensions) == 0', message: 'extensions cannot be loaded yet; send [] or omit it' },
      ],
      profile: [exactlyOneOfIdOrName],
    },
    printerColumns: [
      { name: 'Phase', type: 'string', jsonPath: '.status.phase', description: 'Where the session is in its life' },
      { name: 'Headless', type: 'boolean', jsonPath: '.spec.headless', description: 'Headless browser' },
      { name: 'Pod', type: 'string', jsonPath: '.status.podName', description: 'Pod running the browser', priority: 1 },
      { name: 'Session', type: 'string', jsonPath: '.status.sessionId', description: 'Id in the API', priority: 1 },
      ready,
      age,
    ],
  },
  {
    ...AUTH_CONNECTION,
    shortNames: [...AUTH_CONNECTION.shortNames],
    wire: createConnectionBody,
    status: authConnectionStatusSchema,
    validations: {
      proxy: [exactlyOneOfIdOrName],
      credential: [
        { rule: 'has(self.name) || has(self.provider)', message: 'give a name, or a provider with path or auto' },
        { rule: '!(has(self.name) && has(self.provider))', message: 'name cannot be combined with provider' },
        { rule: 'has(self.provider) || (!has(self.path) && !has(self.auto))', message: 'path and auto need a provider' },
      ],
    },
    printerColumns: [
      { name: 'Domain', type: 'string', jsonPath: '.spec.domain', description: 'Site kept logged in' },
      { name: 'Profile', type: 'string', jsonPath: '.spec.profileName', description: 'Profile kept logged in' },
      { name: 'Status', type: 'string', jsonPath: '.status.status', description: 'AUTHENTICATED or NEEDS_AUTH' },
      ready,
      age,
    ],
  },
];

function withValidations(spec: JsonSchema, validations: KindDefinition['validations']): JsonSchema {
  for (const [path, rules] of Object.entries(validations)) {
    let node = spec;
    for (const part of path ? path.split('.') : []) {
      const next = node.properties?.[part];
      if (!next) throw new Error(`validation path ${path} names no field of the spec`);
      node = next;
    }
    node['x-kubernetes-validations'] = [...(node['x-kubernetes-validations'] ?? []), ...rules];
  }
  return spec;
}

/** The status schema, with conditions merged by type as Kubernetes list-map semantics say. */
function statusSchema(status: z.ZodType): JsonSchema {
  const schema = structuralSchemaOf(wireSchemaOf(status));
  const conditions = schema.properties?.conditions;
  if (conditions) Object.assign(conditions, { 'x-kubernetes-list-type': 'map', 'x-kubernetes-list-map-keys': ['type'] });
  return schema;
}

export function customResourceDefinition(definition: KindDefinition): Record<string, unknown> {
  const spec = structuralSchemaOf(wireSchemaOf(definition.wire));
  spec.properties = { ...spec.properties, project };
  withValidations(spec, definition.validations);
  delete spec.description;
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${definition.plural}.${GROUP}`, labels: { 'app.kubernetes.io/part-of': 'browserplane' } },
    spec: {
      group: GROUP,
      names: {
        kind: definition.kind,
        listKind: `${definition.kind}List`,
        plural: definition.plural,
        singular: definition.singular,
        shortNames: definition.shortNames,
        categories: ['browserplane'],
      },
      scope: 'Namespaced',
      versions: [
        {
          name: VERSION,
          served: true,
          storage: true,
          subresources: { status: {}, ...(definition.scale ? { scale: definition.scale } : {}) },
          additionalPrinterColumns: definition.printerColumns,
          schema: {
            openAPIV3Schema: {
              type: 'object',
              description: `${definition.kind} (Browserplane). The spec mirrors the API's request body in Kubernetes spelling.`,
              required: ['spec'],
              properties: {
                apiVersion: { type: 'string' },
                kind: { type: 'string' },
                metadata: { type: 'object' },
                spec: { ...spec, description: 'Desired state' },
                status: { ...statusSchema(definition.status), description: 'Observed state, written by the operator' },
              },
            },
          },
        },
      ],
    },
  };
}
