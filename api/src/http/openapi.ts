import { z } from 'zod';
import { createDocument, type ZodOpenApiOperationObject, type ZodOpenApiPathsObject } from 'zod-openapi';
import { OPENAPI_TAGS } from './openapi-tags.js';
import type { RouteDef } from './route.js';
import { errorResponses } from './standard-responses.js';

/** Side doors for agents and app runners (token-authorised): served, never published. */
const INTERNAL_PREFIX = '/internal/';
const WILDCARD = /\*([A-Za-z_][A-Za-z0-9_]*)/g;

/** Whether a route belongs in the public document: everything but the /internal side doors. */
export const isDocumented = (route: RouteDef): boolean => !route.path.startsWith(INTERNAL_PREFIX);

/** A route's path as the document spells it: an Express wildcard `*path` becomes a `{path}` parameter. */
export const documentedPath = (route: RouteDef): string => route.path.replace(WILDCARD, '{$1}');

/** The path parameters of a route, its wildcards included (they carry no schema of their own). */
function pathParamsOf(route: RouteDef): z.ZodObject | undefined {
  const wildcards = [...route.path.matchAll(WILDCARD)].map((m) => m[1]!);
  if (wildcards.length === 0) return route.params;
  const shape = Object.fromEntries(
    wildcards.map((name) => [name, z.string().min(1).describe('The rest of the path after the prefix; it may contain slashes')]),
  );
  return route.params ? route.params.extend(shape) : z.object(shape);
}

/** Each route's own tags, which must all be declared with a description. */
function checkTags(routes: RouteDef[]): void {
  const declared = new Set(OPENAPI_TAGS.map((tag) => tag.name));
  const missing = routes.flatMap((route) => route.tags.filter((tag) => !declared.has(tag)).map((tag) => `${route.operationId}: ${tag}`));
  if (missing.length > 0) throw new Error(`OpenAPI tags without a declaration in openapi-tags.ts: ${missing.join(', ')}`);
}

/** JSON bodies by their zod schema; streamed ones (fs writes and uploads) by media type. */
function requestBodyOf(route: RouteDef): Pick<ZodOpenApiOperationObject, 'requestBody'> {
  if (route.bodyType === 'raw') {
    return {
      requestBody: {
        required: true,
        content: { 'application/octet-stream': { schema: { type: 'string', contentMediaType: 'application/octet-stream' } } },
      },
    };
  }
  if (route.bodyType === 'multipart') {
    const json = route.jsonAlternative ? { 'application/json': { schema: route.jsonAlternative } } : {};
    return { requestBody: { required: true, content: { 'multipart/form-data': { schema: { type: 'object' } }, ...json } } };
  }
  return route.body ? { requestBody: { required: false, content: { 'application/json': { schema: route.body } } } } : {};
}

/**
 * The OpenAPI 3.1 document, built from the same route objects and zod schemas that
 * validate requests.
 */
export function buildOpenApiDocument(allRoutes: RouteDef[], version: string): ReturnType<typeof createDocument> {
  const routes = allRoutes.filter(isDocumented);
  checkTags(routes);
  const paths: ZodOpenApiPathsObject = {};
  for (const route of routes) {
    // What any route of its kind can answer, whatever its own list says: any request can
    // have a malformed query string or body, refused before the route runs (400,
    // input-checks.ts) as is a request whose parameters fail validation; a project-scoped request can name a
    // project that does not exist (X-Kernel-Project-Id: 404), any authenticated request
    // can meet an unreachable database (503).
    const common = {
      ...(route.auth === 'public' ? {} : errorResponses(401, 403)),
      ...errorResponses(400),
      ...(route.auth === 'project' ? errorResponses(404) : {}),
      ...(route.body || route.bodyType ? errorResponses(413, 415) : {}),
      ...errorResponses(500),
      // Authenticated routes read the database; while it is unreachable they answer 503
      // database_unavailable with Retry-After.
      ...(route.auth === 'public' ? {} : errorResponses(503)),
    };
    const responses = Object.fromEntries(
      Object.entries({ ...common, ...route.responses }).map(([status, spec]) => [
        status,
        {
          description: spec.description,
          ...(spec.headers ? { headers: z.object(Object.fromEntries(Object.entries(spec.headers).map(([n, h]) => [n, h.schema.describe(h.description)]))) } : {}),
          ...(spec.schema
            ? { content: Object.fromEntries([spec.contentType ?? 'application/json'].flat().map((type) => [type, { schema: spec.schema }])) }
            : {}),
        },
      ]),
    );
    const pathParams = pathParamsOf(route);
    const operation: ZodOpenApiOperationObject = {
      operationId: route.operationId,
      summary: route.summary,
      // The summary says it when there is nothing more to say.
      description: route.description ?? route.summary,
      tags: route.tags,
      ...(route.deprecation ? { deprecated: true } : {}),
      ...(route.auth === 'public' ? { security: [] } : {}),
      requestParams: {
        ...(pathParams ? { path: pathParams } : {}),
        ...(route.query ? { query: route.query } : {}),
        header: z.object({
          ...(route.auth === 'project'
            ? {
                'X-Kernel-Project-Id': z
                  .string()
                  .optional()
                  .describe('Project id or name for an org-wide key; defaults to the org’s default project'),
              }
            : {}),
        }),
      },
      ...requestBodyOf(route),
      responses,
    };
    const path = documentedPath(route);
    paths[path] = { ...paths[path], [route.method]: operation };
  }
  return createDocument({
    openapi: '3.1.0',
    info: {
      title: 'Browserplane API',
      version,
      description: 'Self-hostable control plane for remote browsers, wire-compatible with the Kernel API.',
      license: { name: 'Apache-2.0', identifier: 'Apache-2.0' },
      contact: { name: 'Browserplane', url: 'https://github.com/browserplane/browserplane' },
    },
    tags: [...OPENAPI_TAGS],
    security: [{ bearerAuth: [] }],
    components: { securitySchemes: { bearerAuth: { type: 'http', scheme: 'bearer' } } },
    paths,
  });
}
