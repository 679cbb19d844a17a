import type { Response } from 'express';
import type { Logger } from 'pino';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { z } from 'zod';
import type { AppDeps } from '../../app-deps.js';
import { requireProject } from '../../http/auth-context.js';
import { AppError } from '../../http/errors.js';
import { page, paginationResponseHeaders } from '../../http/pagination.js';
import { defineRoute, json, noContent, type RouteDef, type RouteResult } from '../../http/route.js';
import { errorResponses } from '../../http/standard-responses.js';
import { projectScopeOf } from '../../scope.js';
import {
  createProfileBody,
  downloadProfileQuery,
  listProfilesQuery,
  profileIdParams,
  profileSchema,
  updateProfileBody,
  type ProfileFormat,
} from './schema.js';
import {
  changeProfileName,
  createProfile,
  deleteProfile,
  getProfile,
  presentProfile,
  profileTar,
} from './service.js';
import { listProfiles } from './store.js';
import { compressZstd, ZstdUnavailableError } from './zstd.js';

const tags = ['Profiles'];

/**
 * Media types of the download. The SDK hands binary responses back raw whatever their
 * type, so the precise registered types cost nothing and tell other clients (and
 * browsers saving the file) what the bytes are: application/zstd (RFC 8878) and
 * application/x-tar.
 */
const MEDIA_TYPES: Record<ProfileFormat, string> = { 'tar.zst': 'application/zstd', tar: 'application/x-tar' };

export function profileRoutes(deps: AppDeps): RouteDef[] {
  const { db } = deps;
  return [
    defineRoute({
      method: 'post',
      path: '/profiles',
      operationId: 'createProfile',
      summary: 'Create a browser profile (an empty body is accepted)',
      tags,
      auth: 'project',
      body: createProfileBody,
      responses: { 200: { description: 'The profile', schema: profileSchema }, ...errorResponses(400, 404, 409) },
      handler: async ({ body, auth }) =>
        json(presentProfile(await createProfile(deps, projectScopeOf(auth), body.name ?? null, requireProject(auth).name))),
    }),
    defineRoute({
      method: 'get',
      path: '/profiles',
      operationId: 'listProfiles',
      summary: 'List profiles of the project, newest first',
      tags,
      auth: 'project',
      query: listProfilesQuery,
      responses: {
        200: { description: 'A page of profiles', schema: profileSchema.array(), headers: paginationResponseHeaders },
        ...errorResponses(400),
      },
      handler: async ({ query, auth }) => page(await listProfiles(db, projectScopeOf(auth), query), query, presentProfile),
    }),
    defineRoute({
      method: 'get',
      path: '/profiles/{id_or_name}',
      operationId: 'getProfile',
      summary: 'Get a profile by id or name',
      tags,
      auth: 'project',
      params: profileIdParams,
      responses: { 200: { description: 'The profile', schema: profileSchema }, ...errorResponses(400, 404) },
      handler: async ({ params, auth }) => json(presentProfile(await getProfile(deps, projectScopeOf(auth), params.id_or_name))),
    }),
    defineRoute({
      method: 'patch',
      path: '/profiles/{id_or_name}',
      operationId: 'updateProfile',
      summary: 'Rename a profile',
      tags,
      auth: 'project',
      params: profileIdParams,
      body: updateProfileBody,
      responses: { 200: { description: 'The profile', schema: profileSchema }, ...errorResponses(400, 404, 409) },
      handler: async ({ params, body, auth }) =>
        json(presentProfile(await changeProfileName(deps, projectScopeOf(auth), params.id_or_name, body.name))),
    }),
    defineRoute({
      method: 'delete',
      path: '/profiles/{id_or_name}',
      operationId: 'deleteProfile',
      summary: 'Delete a profile and its stored files',
      tags,
      auth: 'project',
      params: profileIdParams,
      responses: { 204: { description: 'Deleted' }, ...errorResponses(400, 404) },
      handler: async ({ params, auth }) => {
        await deleteProfile(deps, projectScopeOf(auth), params.id_or_name);
        return noContent();
      },
    }),
    defineRoute({
      method: 'get',
      path: '/profiles/{id_or_name}/download',
      operationId: 'downloadProfile',
      summary: 'Download the profile’s files as a tar.zst (default) or a tar',
      description:
        'A streamed archive of the stored user-data directory, paths relative to its root. ' +
        'A profile no session has saved yet downloads as an empty archive.',
      tags,
      auth: 'project',
      params: profileIdParams,
      query: downloadProfileQuery,
      responses: {
        200: {
          description: 'The archive (application/zstd for tar.zst, application/x-tar for tar)',
          schema: z.string().meta({ format: 'binary' }),
          contentType: [MEDIA_TYPES['tar.zst'], MEDIA_TYPES.tar],
        },
        ...errorResponses(400, 404, 500),
      },
      handler: async ({ params, query, auth, res, log }) => {
        const row = await getProfile(deps, projectScopeOf(auth), params.id_or_name);
        const tar = await profileTar(deps, row);
        const body = query.format === 'tar.zst' ? await zstdOrFail(tar) : tar;
        res.status(200);
        res.setHeader('Content-Type', MEDIA_TYPES[query.format]);
        res.setHeader('Content-Disposition', `attachment; filename="${row.name ?? row.id}.${query.format}"`);
        // The archive holds cookies and logins.
        res.setHeader('Cache-Control', 'no-store');
        return stream(body, res, log, row.id);
      },
    }),
  ];
}

async function zstdOrFail(tar: Readable): Promise<Readable> {
  try {
    return await compressZstd(tar);
  } catch (error) {
    if (!(error instanceof ZstdUnavailableError)) throw error;
    throw new AppError(500, 'zstd_unavailable', 'This server cannot compress with zstd (the zstd command is missing); use format=tar', {
      shouldRetry: false,
      cause: error,
    });
  }
}

/**
 * Streams the archive. Once the headers are out an error can no longer become an error
 * body: the connection is cut instead, so the client sees an incomplete transfer (no
 * final chunk) rather than a short archive that looks whole.
 */
async function stream(body: Readable, res: Response, log: Logger, profileId: string): Promise<RouteResult> {
  try {
    await pipeline(body, res);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ERR_STREAM_PREMATURE_CLOSE') {
      log.info({ profileId }, 'client left before the profile download finished');
    } else {
      log.error({ err: error, profileId }, 'profile download failed mid-stream');
    }
    res.destroy();
  }
  return { kind: 'handled' };
}
