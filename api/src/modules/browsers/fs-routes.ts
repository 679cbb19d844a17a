import type { AppDeps } from '../../app-deps.js';
import { requireProject, type AuthContext } from '../../http/auth-context.js';
import { AppError } from '../../http/errors.js';
import { defineRoute, type RouteDef } from '../../http/route.js';
import { errorResponses } from '../../http/standard-responses.js';
import { callAgentJson, streamAgent } from './fs-agent.js';
import {
  binary,
  createDirectoryBody,
  fileInfoSchema,
  moveBody,
  pathBody,
  pathQuery,
  setFilePermissionsBody,
  watchBody,
  watchParams,
  watchStartedSchema,
  writeFileQuery,
} from './fs-schema.js';
import { browserIdParams } from './schema.js';
import { getSession } from './service.js';
import { agentEndpoint, type AgentEndpoint } from '../../../../contract/agent-client.js';

/**
 * /browsers/{id}/fs/* (CONTRACT.md §2.2): validated here, then forwarded to the
 * session's agent, which confines every path to the browser's own filesystem
 * (agent/src/fs). Bodies and answers are streamed, never buffered.
 */

const tags = ['Browser filesystem'];
const base = '/browsers/{id_or_name}/fs';
const done = { 204: { description: 'Done' } };

export function fsRoutes(deps: AppDeps): RouteDef[] {
  const agentOf = async (auth: AuthContext, idOrName: string): Promise<AgentEndpoint> => {
    const session = await getSession(deps.db, { orgId: auth.orgId, projectId: requireProject(auth).id }, idOrName);
    if (!session.agent_url) throw new AppError(409, 'browser_not_ready', 'The browser is still starting', { shouldRetry: false });
    return agentEndpoint(deps.agentTokens, session.id, session.agent_url);
  };
  return [
    defineRoute({
      method: 'put',
      path: `${base}/write_file`,
      operationId: 'browserFsWriteFile',
      summary: 'Write a file from the raw request body (application/octet-stream)',
      description:
        'Missing parent directories are created (755). A symlink or a file with other hard links at the path is refused (400). A write that would pass the browser\'s disk quota is refused (413 quota_exceeded) and leaves no partial file. setuid, setgid and sticky bits are refused.',
      tags,
      auth: 'project',
      params: browserIdParams,
      query: writeFileQuery,
      bodyType: 'raw',
      responses: { ...done, ...errorResponses(400, 403, 404, 409, 413, 415, 507) },
      handler: async ({ params, query, auth, req }) =>
        callAgentJson(await agentOf(auth, params.id_or_name), { method: 'PUT', path: '/fs/write_file', query, body: { stream: req } }),
    }),
    defineRoute({
      method: 'get',
      path: `${base}/file_info`,
      operationId: 'browserFsFileInfo',
      summary: 'Metadata of a file or directory',
      tags,
      auth: 'project',
      params: browserIdParams,
      query: pathQuery,
      responses: { 200: { description: 'The file', schema: fileInfoSchema }, ...errorResponses(400, 404) },
      handler: async ({ params, query, auth }) => callAgentJson(await agentOf(auth, params.id_or_name), { method: 'GET', path: '/fs/file_info', query }),
    }),
    defineRoute({
      method: 'get',
      path: `${base}/read_file`,
      operationId: 'browserFsReadFile',
      summary: 'The bytes of a file',
      tags,
      auth: 'project',
      params: browserIdParams,
      query: pathQuery,
      responses: { 200: { description: 'File bytes', schema: binary, contentType: 'application/octet-stream' }, ...errorResponses(400, 404) },
      handler: async ({ params, query, auth, res }) =>
        streamAgent(await agentOf(auth, params.id_or_name), { method: 'GET', path: '/fs/read_file', query }, res),
    }),
    defineRoute({
      method: 'get',
      path: `${base}/list_files`,
      operationId: 'browserFsListFiles',
      summary: 'Entries of a directory (a bare array, not paginated)',
      tags,
      auth: 'project',
      params: browserIdParams,
      query: pathQuery,
      responses: { 200: { description: 'The entries', schema: fileInfoSchema.array() }, ...errorResponses(400, 404) },
      handler: async ({ params, query, auth }) => callAgentJson(await agentOf(auth, params.id_or_name), { method: 'GET', path: '/fs/list_files', query }),
    }),
    ...bodyOps(agentOf),
    defineRoute({
      method: 'get',
      path: `${base}/download_dir_zip`,
      operationId: 'browserFsDownloadDirZip',
      summary: 'A directory tree as a zip (regular files and directories; symlinks left out)',
      tags,
      auth: 'project',
      params: browserIdParams,
      query: pathQuery,
      responses: { 200: { description: 'Zip bytes', schema: binary, contentType: 'application/zip' }, ...errorResponses(400, 403, 404, 413) },
      handler: async ({ params, query, auth, res }) =>
        streamAgent(await agentOf(auth, params.id_or_name), { method: 'GET', path: '/fs/download_dir_zip', query }, res),
    }),
    ...uploadRoutes(agentOf),
    ...watchRoutes(agentOf),
  ];
}

type AgentOf = (auth: AuthContext, idOrName: string) => Promise<AgentEndpoint>;

const BODY_OPS = [
  { op: 'create_directory', body: createDirectoryBody, summary: 'Create a directory and any missing parents (mode default 755)', errors: [400, 403, 404, 409, 413, 507] },
  { op: 'delete_file', body: pathBody, summary: 'Delete a file or symlink (never its target)', errors: [400, 403, 404, 409] },
  { op: 'delete_directory', body: pathBody, summary: 'Delete a directory tree', errors: [400, 403, 404, 409] },
  { op: 'move', body: moveBody, summary: 'Move or rename a file or directory', errors: [400, 403, 404, 409, 507] },
  {
    op: 'set_file_permissions',
    body: setFilePermissionsBody,
    summary: "Change mode, and optionally owner and group, of a file or directory. Owner and group may only be the browser's own user and group; setuid, setgid and sticky bits are refused (400)",
    errors: [400, 403, 404],
  },
] as const;

const operationIdOf = (op: string) => `browserFs${op.replace(/(^|_)([a-z])/g, (_, __, c: string) => c.toUpperCase())}`;

function bodyOps(agentOf: AgentOf): RouteDef[] {
  return BODY_OPS.map(({ op, body, summary, errors }) =>
    defineRoute({
      method: 'put',
      path: `${base}/${op}`,
      operationId: operationIdOf(op),
      summary,
      tags,
      auth: 'project',
      params: browserIdParams,
      body,
      responses: { ...done, ...errorResponses(...errors) },
      handler: async ({ params, body: input, auth }) =>
        callAgentJson(await agentOf(auth, params.id_or_name), { method: 'PUT', path: `/fs/${op}`, body: { json: input } }),
    }),
  );
}

function uploadRoutes(agentOf: AgentOf): RouteDef[] {
  const upload = (op: 'upload' | 'upload_zip', summary: string) =>
    defineRoute({
      method: 'post',
      path: `${base}/${op}`,
      operationId: operationIdOf(op),
      summary,
      tags,
      auth: 'project',
      params: browserIdParams,
      bodyType: 'multipart',
      responses: { ...done, ...errorResponses(400, 403, 404, 409, 413, 415, 507) },
      handler: async ({ params, auth, req }) =>
        callAgentJson(await agentOf(auth, params.id_or_name), { method: 'POST', path: `/fs/${op}`, body: { stream: req } }),
    });
  return [
    upload('upload', 'Write files from multipart parts files[i][dest_path] and files[i][file]'),
    upload(
      'upload_zip',
      'Extract a zip (multipart zip_file) into dest_path; an entry leaving it (zip-slip), a symlink entry, or a zip past the limits (entries, total size, expansion ratio, quota: 413) refuses the whole zip',
    ),
  ];
}

function watchRoutes(agentOf: AgentOf): RouteDef[] {
  return [
    defineRoute({
      method: 'post',
      path: `${base}/watch`,
      operationId: 'browserFsWatchStart',
      summary: 'Start watching a directory',
      description: 'Events: CREATE, WRITE, DELETE (a move shows as DELETE + CREATE). Events before the stream is opened are kept (up to 1000).',
      tags,
      auth: 'project',
      params: browserIdParams,
      body: watchBody,
      responses: { 200: { description: 'The watch', schema: watchStartedSchema }, ...errorResponses(400, 404) },
      handler: async ({ params, body, auth }) =>
        callAgentJson(await agentOf(auth, params.id_or_name), { method: 'POST', path: '/fs/watch', body: { json: body } }),
    }),
    defineRoute({
      method: 'get',
      path: `${base}/watch/{watch_id}/events`,
      operationId: 'browserFsWatchEvents',
      summary: 'Server-sent events of a watch',
      tags,
      auth: 'project',
      params: watchParams,
      responses: { 200: { description: 'SSE of WatchEvent', schema: binary, contentType: 'text/event-stream' }, ...errorResponses(404) },
      handler: async ({ params, auth, res }) =>
        streamAgent(
          await agentOf(auth, params.id_or_name),
          { method: 'GET', path: `/fs/watch/${encodeURIComponent(params.watch_id)}/events`, longLived: true },
          res,
        ),
    }),
    defineRoute({
      method: 'delete',
      path: `${base}/watch/{watch_id}`,
      operationId: 'browserFsWatchStop',
      summary: 'Stop a watch',
      tags,
      auth: 'project',
      params: watchParams,
      responses: { ...done, ...errorResponses(404) },
      handler: async ({ params, auth }) =>
        callAgentJson(await agentOf(auth, params.id_or_name), { method: 'DELETE', path: `/fs/watch/${encodeURIComponent(params.watch_id)}` }),
    }),
  ];
}
