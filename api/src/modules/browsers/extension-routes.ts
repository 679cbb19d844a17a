import type { AppDeps } from '../../app-deps.js';
import { agentEndpoint } from '../../../../contract/agent-client.js';
import { AppError } from '../../http/errors.js';
import { defineRoute, type RouteDef } from '../../http/route.js';
import { errorResponses } from '../../http/standard-responses.js';
import { projectScopeOf } from '../../scope.js';
import { callAgentJson } from './fs-agent.js';
import { browserIdParams } from './schema.js';
import { getSession } from './service.js';

/**
 * POST /browsers/{id}/extensions (CONTRACT §2.5): zips loaded into a running browser,
 * not stored in the project. The multipart body is streamed on to the session's agent
 * (agent/src/extensions), which checks every zip as an upload is checked, unpacks them and
 * restarts Chromium on the same user-data dir: cookies and storage stay, the session id and
 * its CDP URL stay, and connected CDP and BiDi clients are disconnected (they reconnect to
 * the same URL).
 */
export function extensionRoutes(deps: AppDeps): RouteDef[] {
  return [
    defineRoute({
      method: 'post',
      path: '/browsers/{id_or_name}/extensions',
      operationId: 'browserLoadExtensions',
      summary: 'Load unpacked extensions into a running browser (multipart extensions[i][name], extensions[i][zip_file]); Chromium restarts',
      description:
        'Each name is the folder the extension is unpacked into (letters, digits, ".", "_", "-"; a name already loaded is 409). ' +
        'Every zip is checked like POST /extensions before anything changes (400, 413). Chromium restarts with the same user-data dir: ' +
        'cookies and storage are kept, open pages are not, and CDP clients are disconnected (reconnect to the same cdp_ws_url).',
      tags: ['Browsers'],
      auth: 'project',
      params: browserIdParams,
      bodyType: 'multipart',
      responses: { 204: { description: 'Loaded; Chromium restarted' }, ...errorResponses(400, 404, 409, 413, 415) },
      handler: async ({ params, auth, req }) => {
        const session = await getSession(deps.db, projectScopeOf(auth), params.id_or_name);
        if (!session.agent_url) throw new AppError(409, 'browser_not_ready', 'The browser is still starting', { shouldRetry: false });
        const agent = agentEndpoint(deps.agentTokens, session.id, session.agent_url);
        return callAgentJson(agent, { method: 'POST', path: '/extensions', body: { stream: req }, timeoutMs: 120_000 });
      },
    }),
  ];
}
