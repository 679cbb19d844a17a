import type { Response } from 'express';
import { z } from 'zod';
import type { AppDeps } from '../../app-deps.js';
import { badRequest, notFound } from '../../http/errors.js';
import { page, paginationResponseHeaders } from '../../http/pagination.js';
import { defineRoute, json, noContent, type RouteDef, type RouteResult } from '../../http/route.js';
import { errorResponses } from '../../http/standard-responses.js';
import { projectScopeOf } from '../../scope.js';
import { downloadFromChromeStore } from './chrome-store.js';
import { readZipForm } from './form.js';
import { chromeStoreQuery, extensionIdParams, extensionSchema, listExtensionsQuery, uploadFields } from './schema.js';
import { createExtension, extensionSettings, getExtension, presentExtension, removeExtension } from './service.js';
import { listExtensions, readExtensionArchive } from './store.js';

const tags = ['Extensions'];
const zipBody = { description: 'The zip', schema: z.string().meta({ format: 'binary' }), contentType: 'application/zip' };

function sendZip(res: Response, zip: Buffer, filename: string): RouteResult {
  res.status(200);
  res.setHeader('Content-Type', 'application/zip');
  res.setHeader('Content-Length', String(zip.length));
  res.setHeader('Content-Disposition', `attachment; filename="${filename.replace(/[^A-Za-z0-9._-]/g, '_')}.zip"`);
  res.setHeader('Cache-Control', 'no-store');
  res.end(zip);
  return { kind: 'handled' };
}

export function extensionRoutes(deps: AppDeps): RouteDef[] {
  return [
    defineRoute({
      method: 'post',
      path: '/extensions',
      operationId: 'uploadExtension',
      summary: 'Upload an unpacked extension as a zip (multipart: file, name optional)',
      description:
        'The zip must hold manifest.json (manifest_version 2 or 3, name, version) at its root or in its one top folder. ' +
        'Refused whole, with nothing stored, when an entry is absolute, leaves the zip (..), is a link or a special file (400), ' +
        'or past the size and entry limits (413).',
      tags,
      auth: 'project',
      bodyType: 'multipart',
      responses: { 200: { description: 'The stored extension', schema: extensionSchema }, ...errorResponses(400, 404, 409, 413, 415) },
      handler: async ({ auth, req }) => {
        const form = await readZipForm(req, { maxZipBytes: extensionSettings(deps).maxZipBytes, maxFiles: 1, maxFields: 4 });
        const fields = uploadFields.safeParse(Object.fromEntries(form.fields.map((f) => [f.name, f.value])));
        if (!fields.success) throw badRequest('invalid_request', fields.error.issues.map((i) => `${i.path.join('.') || 'form'}: ${i.message}`).join('; '));
        const file = form.files.find((f) => f.field === 'file');
        if (!file) throw badRequest('invalid_request', 'The zip must be sent as the multipart file part "file"', [{ code: 'required', message: 'required', field: 'file' }]);
        return json(presentExtension(await createExtension(deps, projectScopeOf(auth), { name: fields.data.name ?? null, zip: file.bytes })));
      },
    }),
    defineRoute({
      method: 'get',
      path: '/extensions',
      operationId: 'listExtensions',
      summary: 'List extensions of the project, newest first',
      tags,
      auth: 'project',
      query: listExtensionsQuery,
      responses: { 200: { description: 'A page of extensions', schema: extensionSchema.array(), headers: paginationResponseHeaders }, ...errorResponses(400) },
      handler: async ({ query, auth }) => page(await listExtensions(deps.db, projectScopeOf(auth), query), query, presentExtension),
    }),
    // Before /extensions/{id_or_name}, which would take "from_chrome_store" as a name.
    defineRoute({
      method: 'get',
      path: '/extensions/from_chrome_store',
      operationId: 'downloadExtensionFromChromeStore',
      summary: 'Download an extension from the Chrome Web Store as a zip',
      description: 'Needs the store (BROWSERPLANE_CHROME_STORE_URL); when it cannot be reached: 424 chrome_store_unreachable. Nothing is stored.',
      tags,
      auth: 'project',
      query: chromeStoreQuery,
      responses: { 200: zipBody, ...errorResponses(400, 404, 413, 424) },
      handler: async ({ query, res }) => sendZip(res, await downloadFromChromeStore(extensionSettings(deps), query), 'extension'),
    }),
    defineRoute({
      method: 'get',
      path: '/extensions/{id_or_name}',
      operationId: 'downloadExtension',
      summary: 'Download an extension’s zip, byte for byte as uploaded',
      tags,
      auth: 'project',
      params: extensionIdParams,
      responses: { 200: zipBody, ...errorResponses(400, 404) },
      handler: async ({ params, auth, res }) => {
        const scope = projectScopeOf(auth);
        const row = await getExtension(deps.db, scope, params.id_or_name);
        const zip = await readExtensionArchive(deps.db, scope, row.id);
        if (!zip) throw notFound('Extension', params.id_or_name);
        return sendZip(res, zip, row.name ?? row.id);
      },
    }),
    defineRoute({
      method: 'get',
      path: '/extensions/{id_or_name}/metadata',
      operationId: 'getExtension',
      summary: 'Get an extension’s metadata by id or name',
      tags,
      auth: 'project',
      params: extensionIdParams,
      responses: { 200: { description: 'The extension', schema: extensionSchema }, ...errorResponses(400, 404) },
      handler: async ({ params, auth }) => json(presentExtension(await getExtension(deps.db, projectScopeOf(auth), params.id_or_name))),
    }),
    defineRoute({
      method: 'delete',
      path: '/extensions/{id_or_name}',
      operationId: 'deleteExtension',
      summary: 'Delete an extension (browsers running with it keep it until they end); 409 while a browser pool loads it',
      tags,
      auth: 'project',
      params: extensionIdParams,
      responses: { 204: { description: 'Deleted' }, ...errorResponses(400, 404, 409) },
      handler: async ({ params, auth }) => {
        await removeExtension(deps, projectScopeOf(auth), params.id_or_name);
        return noContent();
      },
    }),
  ];
}
