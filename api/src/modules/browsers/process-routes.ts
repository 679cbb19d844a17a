import type { z } from 'zod';
import type { AppDeps } from '../../app-deps.js';
import { requireProject, type AuthContext } from '../../http/auth-context.js';
import { AppError } from '../../http/errors.js';
import { defineRoute, type ResponseSpec, type RouteDef } from '../../http/route.js';
import { errorResponses } from '../../http/standard-responses.js';
import { agentEndpoint, type AgentEndpoint } from '../../../../contract/agent-client.js';
import { callAgentJson, streamAgent } from './fs-agent.js';
import {
  execBody,
  execResultSchema,
  killBody,
  okSchema,
  processParams,
  resizeBody,
  spawnBody,
  spawnResultSchema,
  sseSchema,
  statusSchema,
  stdinBody,
  stdinResultSchema,
} from './process-schema.js';
import { browserIdParams } from './schema.js';
import { getSession } from './service.js';

/**
 * /browsers/{id}/process/* (CONTRACT.md §2.4): validated here, then forwarded to the
 * session's agent, which runs each process sandboxed as the browser's own user with the
 * browser's filesystem as "/" (agent/src/process, docs/processes.md). An exec's answer
 * waits for the process: the agent caps exec's timeout (240 s by default) below the
 * 300 s the forwarding waits for an answer.
 */

const tags = ['Browser processes'];
const base = '/browsers/{id_or_name}/process';

const ok = (description: string, schema: z.ZodType): Record<number, ResponseSpec> => ({ 200: { description, schema } });

export function processRoutes(deps: AppDeps): RouteDef[] {
  const agentOf = async (auth: AuthContext, idOrName: string): Promise<AgentEndpoint> => {
    const session = await getSession(deps.db, { orgId: auth.orgId, projectId: requireProject(auth).id }, idOrName);
    if (!session.agent_url) throw new AppError(409, 'browser_not_ready', 'The browser is still starting', { shouldRetry: false });
    return agentEndpoint(deps.agentTokens, session.id, session.agent_url);
  };
  const onProcess = (suffix: string, processId: string) => `/process/${encodeURIComponent(processId)}/${suffix}`;
  return [
    defineRoute({
      method: 'post',
      path: `${base}/exec`,
      operationId: 'browserProcessExec',
      summary: 'Run a command to completion',
      description: 'stdout and stderr are capped (1 MiB each by default; *_truncated says so). A process still running at timeout_sec is killed (timed_out: true).',
      tags,
      auth: 'project',
      params: browserIdParams,
      body: execBody,
      responses: { ...ok('The finished process', execResultSchema), ...errorResponses(400, 404, 409, 413, 502) },
      handler: async ({ params, body, auth }) => callAgentJson(await agentOf(auth, params.id_or_name), { method: 'POST', path: '/process/exec', body: { json: body } }),
    }),
    defineRoute({
      method: 'post',
      path: `${base}/spawn`,
      operationId: 'browserProcessSpawn',
      summary: 'Start a command and return at once',
      description: 'At most 16 processes run at once per browser by default (409 process_limit_reached).',
      tags,
      auth: 'project',
      params: browserIdParams,
      body: spawnBody,
      responses: { ...ok('The started process', spawnResultSchema), ...errorResponses(400, 404, 409, 413, 502) },
      handler: async ({ params, body, auth }) => callAgentJson(await agentOf(auth, params.id_or_name), { method: 'POST', path: '/process/spawn', body: { json: body } }),
    }),
    defineRoute({
      method: 'get',
      path: `${base}/{process_id}/status`,
      operationId: 'browserProcessStatus',
      summary: 'State, exit code, CPU and memory of a process',
      tags,
      auth: 'project',
      params: processParams,
      responses: { ...ok('The process', statusSchema), ...errorResponses(400, 404, 502) },
      handler: async ({ params, auth }) => callAgentJson(await agentOf(auth, params.id_or_name), { method: 'GET', path: onProcess('status', params.process_id) }),
    }),
    defineRoute({
      method: 'post',
      path: `${base}/{process_id}/stdin`,
      operationId: 'browserProcessStdin',
      summary: "Write to a process's stdin (its terminal, with allocate_tty)",
      tags,
      auth: 'project',
      params: processParams,
      body: stdinBody,
      responses: { ...ok('Written', stdinResultSchema), ...errorResponses(400, 404, 409, 413, 502) },
      handler: async ({ params, body, auth }) =>
        callAgentJson(await agentOf(auth, params.id_or_name), { method: 'POST', path: onProcess('stdin', params.process_id), body: { json: body } }),
    }),
    defineRoute({
      method: 'post',
      path: `${base}/{process_id}/kill`,
      operationId: 'browserProcessKill',
      summary: 'Send a signal to every process of its sandbox',
      tags,
      auth: 'project',
      params: processParams,
      body: killBody,
      responses: { ...ok('Sent', okSchema), ...errorResponses(400, 404, 409, 502) },
      handler: async ({ params, body, auth }) =>
        callAgentJson(await agentOf(auth, params.id_or_name), { method: 'POST', path: onProcess('kill', params.process_id), body: { json: body } }),
    }),
    defineRoute({
      method: 'post',
      path: `${base}/{process_id}/resize`,
      operationId: 'browserProcessResize',
      summary: "Resize a process's terminal (allocate_tty only: else 409 not_a_tty)",
      tags,
      auth: 'project',
      params: processParams,
      body: resizeBody,
      responses: { ...ok('Resized', okSchema), ...errorResponses(400, 404, 409, 502) },
      handler: async ({ params, body, auth }) =>
        callAgentJson(await agentOf(auth, params.id_or_name), { method: 'POST', path: onProcess('resize', params.process_id), body: { json: body } }),
    }),
    defineRoute({
      method: 'get',
      path: `${base}/{process_id}/stdout/stream`,
      operationId: 'browserProcessStdoutStream',
      summary: "Server-sent events of a process's output, ending with its exit",
      description: 'A late subscriber first gets the output still kept (the last 1 MiB by default), then the rest as it comes.',
      tags,
      auth: 'project',
      params: processParams,
      responses: { 200: { description: 'SSE of output frames', schema: sseSchema, contentType: 'text/event-stream' }, ...errorResponses(400, 404, 502) },
      handler: async ({ params, auth, res }) =>
        streamAgent(await agentOf(auth, params.id_or_name), { method: 'GET', path: onProcess('stdout/stream', params.process_id), longLived: true }, res),
    }),
  ];
}
