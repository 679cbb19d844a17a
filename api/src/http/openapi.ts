import { z } from 'zod';
import { createDocument, type ZodOpenApiOperationObject, type ZodOpenApiPathsObject } from 'zod-openapi';
import type { RouteDef } from './route.js';
import { errorResponses } from './standard-responses.js';

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
export function buildOpenApiDocument(routes: RouteDef[], version: string): ReturnType<typeof createDocument> {
  const paths: ZodOpenApiPathsObject = {};
  for (const route of routes) {
    // What any route of its kind can answer, whatever its own list says: a request
    // with parameters can fail validation (400), a project-scoped request can name a
    // project that does not exist (X-Kernel-Project-Id: 404), any authenticated request
    // can meet an unreachable database (503).
    const common = {
      ...(route.auth === 'public' ? {} : errorResponses(401, 403)),
      ...(route.params || route.query || route.body ? errorResponses(400) : {}),
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
    const operation: ZodOpenApiOperationObject = {
      operationId: route.operationId,
      summary: route.summary,
      ...(route.description ? { description: route.description } : {}),
      tags: route.tags,
      ...(route.deprecation ? { deprecated: true } : {}),
      ...(route.auth === 'public' ? { security: [] } : {}),
      requestParams: {
        ...(route.params ? { path: route.params } : {}),
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
    paths[route.path] = { ...paths[route.path], [route.method]: operation };
  }
  return createDocument({
    openapi: '3.1.0',
    info: {
      title: 'Browserplane API',
      version,
      description: 'Self-hostable control plane for remote browsers, wire-compatible with the Kernel API.',
    },
    security: [{ bearerAuth: [] }],
    components: { securitySchemes: { bearerAuth: { type: 'http', scheme: 'bearer' } } },
    paths,
  });
}
