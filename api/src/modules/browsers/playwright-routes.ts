import type { AppDeps } from '../../app-deps.js';
import { AppError } from '../../http/errors.js';
import { defineRoute, type RouteDef } from '../../http/route.js';
import { errorResponses } from '../../http/standard-responses.js';
import { projectScopeOf } from '../../scope.js';
import { agentEndpoint } from '../../../../contract/agent-client.js';
import { callAgentJson } from './fs-agent.js';
import { PLAYWRIGHT_DEFAULT_TIMEOUT_SEC, playwrightExecuteBody, playwrightExecuteResult } from './playwright-schema.js';
import { browserIdParams } from './schema.js';
import { getSession } from './service.js';

/**
 * POST /browsers/{id}/playwright/execute: validated here, then run by the session's agent
 * in a fresh process of its own, confined to the session's user (agent/src/playwright).
 * The code's own failures are 200 with success false, as Kernel answers them.
 */

/** Beyond the code's time: the runner's start and connection (at most 30 s on the agent) and the answer's way back. */
const AGENT_MARGIN_MS = 45_000;

export function playwrightRoutes(deps: AppDeps): RouteDef[] {
  return [
    defineRoute({
      method: 'post',
      path: '/browsers/{id_or_name}/playwright/execute',
      operationId: 'browserPlaywrightExecute',
      summary: 'Run Playwright code against the browser',
      description:
        'The code runs as the body of an async function in a fresh Node process next to the browser, with `page` (the first page of the first context), `context` and `browser` connected over CDP. ' +
        'A thrown error, a syntax error and a timeout answer 200 with success false and the reason in error. At most 2 executions run at once per browser (409 too_many_executions). See docs/playwright-execution.md.',
      tags: ['Browser Playwright'],
      auth: 'project',
      params: browserIdParams,
      body: playwrightExecuteBody,
      responses: { 200: { description: 'How the code ran', schema: playwrightExecuteResult }, ...errorResponses(400, 404, 409, 502) },
      handler: async ({ params, body, auth }) => {
        const session = await getSession(deps.db, projectScopeOf(auth), params.id_or_name);
        if (!session.agent_url) throw new AppError(409, 'browser_not_ready', 'The browser is still starting', { shouldRetry: false });
        const timeoutSec = body.timeout_sec ?? PLAYWRIGHT_DEFAULT_TIMEOUT_SEC;
        return callAgentJson(agentEndpoint(deps.agentTokens, session.id, session.agent_url), {
          method: 'POST',
          path: '/playwright/execute',
          body: { json: { code: body.code, timeout_sec: timeoutSec } },
          timeoutMs: timeoutSec * 1000 + AGENT_MARGIN_MS,
        });
      },
    }),
  ];
}
