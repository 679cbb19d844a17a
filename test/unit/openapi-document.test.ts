import { z } from 'zod';
import { describe, expect, it } from 'vitest';
import { buildOpenApiDocument } from '../../api/src/http/openapi.js';
import { defineRoute, json, type RouteDef } from '../../api/src/http/route.js';
import { dragMouseBody } from '../../api/src/modules/browsers/computer-schema.js';

const route = (path: string, overrides: Partial<RouteDef> = {}): RouteDef =>
  defineRoute({
    method: 'get',
    path,
    operationId: `op${path.replace(/\W/g, '_')}`,
    summary: `Reads ${path}`,
    tags: ['Operations'],
    auth: 'public',
    responses: { 200: { description: 'OK', schema: z.object({ ok: z.boolean() }) } },
    handler: () => json({ ok: true }),
    ...overrides,
  });

type Doc = { paths: Record<string, Record<string, { description?: string; parameters?: Array<{ in: string; name: string; required?: boolean }> }>>; tags: Array<{ name: string; description: string }> };
const build = (routes: RouteDef[]) => buildOpenApiDocument(routes, '0.0.0') as unknown as Doc;

describe('buildOpenApiDocument', () => {
  it('leaves the /internal side doors out of the document', () => {
    const doc = build([route('/status'), route('/internal/browsers/{session_id}/profile', { params: z.object({ session_id: z.string().describe('id') }) })]);
    expect(Object.keys(doc.paths)).toEqual(['/status']);
  });

  it('publishes an Express wildcard as a required {name} path parameter', () => {
    const doc = build([route('/live-view/*path')]);
    expect(Object.keys(doc.paths)).toEqual(['/live-view/{path}']);
    expect(doc.paths['/live-view/{path}']!.get!.parameters).toEqual([expect.objectContaining({ in: 'path', name: 'path', required: true })]);
  });

  it('refuses a tag that is not declared, and declares the ones it knows with a description', () => {
    expect(() => build([route('/x', { tags: ['Nowhere'] })])).toThrow(/Nowhere/);
    const doc = build([route('/status')]);
    expect(doc.tags.find((tag) => tag.name === 'Operations')?.description).toBeTruthy();
  });

  it('gives every operation a description, its summary when it has none of its own', () => {
    const doc = build([route('/a'), route('/b', { description: 'More about b' })]);
    expect(doc.paths['/a']!.get!.description).toBe('Reads /a');
    expect(doc.paths['/b']!.get!.description).toBe('More about b');
  });

  it('publishes the drag path’s [x, y] points as items with bounds, never a tuple with items: false', () => {
    const doc = build([route('/drag', { method: 'post', body: dragMouseBody })]);
    const text = JSON.stringify(doc);
    expect(text).not.toContain('"items":false');
    expect(text).not.toContain('prefixItems');
    expect(text).toContain('"minItems":2,"maxItems":2');
  });
});
