import type { AppDeps } from '../../app-deps.js';
import { AppError, validationFailed } from '../../http/errors.js';
import { defineRoute, type RouteDef } from '../../http/route.js';
import { errorResponses } from '../../http/standard-responses.js';
import { projectScopeOf } from '../../scope.js';
import { agentEndpoint } from '../../../../contract/agent-client.js';
import { streamAgent } from './fs-agent.js';
import { logEventSchema, logQueryIssues, logStreamQuery } from './logs-schema.js';
import { browserIdParams } from './schema.js';
import { getSession } from './service.js';

/**
 * GET /browsers/{id}/logs/stream (CONTRACT.md §2.4, docs/logs.md): checked here, then
 * streamed from the session's agent (agent/src/logs), which follows a file of the
 * browser's filesystem or replays and follows its processes' output. The same agent
 * runs as a local child process and in a browser pod, so both runtimes serve it alike.
 */
export function logsRoutes(deps: AppDeps): RouteDef[] {
  return [
    defineRoute({
      method: 'get',
      path: '/browsers/{id_or_name}/logs/stream',
      operationId: 'browserLogsStream',
      summary: "Server-sent events of a file's lines (tail -F) or of the browser's own processes",
      description:
        'source=path: the last 1000 lines of the file (found in its last 1 MiB), then with follow every appended line; a truncated file is read again from its start, a rotated one from the new file\'s start. ' +
        'A missing file is 404 not_found; a path out of the browser filesystem (.., a symlink or hard link out) is 400 invalid_path. ' +
        'source=supervisor: the last 1000 lines (1 MiB) kept per process (chromium, agent, xvfb, x11vnc), then with follow every new line. ' +
        'follow defaults to true. At most 8 log streams per browser by default (409 log_stream_limit_reached).',
      tags: ['Browsers'],
      auth: 'project',
      params: browserIdParams,
      query: logStreamQuery,
      responses: {
        200: { description: 'SSE of LogEvent frames', schema: logEventSchema, contentType: 'text/event-stream' },
        ...errorResponses(400, 404, 409, 502),
      },
      handler: async ({ params, query, auth, res }) => {
        const session = await getSession(deps.db, projectScopeOf(auth), params.id_or_name);
        const issues = logQueryIssues(query);
        if (issues.length > 0) throw validationFailed(issues);
        if (!session.agent_url) throw new AppError(409, 'browser_not_ready', 'The browser is still starting', { shouldRetry: false });
        const agent = agentEndpoint(deps.agentTokens, session.id, session.agent_url);
        const forwarded = {
          source: query.source,
          follow: query.follow === undefined ? undefined : String(query.follow),
          path: query.path,
          supervisor_process: query.supervisor_process || undefined,
        };
        return streamAgent(agent, { method: 'GET', path: '/logs/stream', query: forwarded, longLived: true }, res);
      },
    }),
  ];
}
