import { chromium, type Browser, type Page } from 'playwright-core';
import type { AppDeps } from '../../../app-deps.js';
import { agentEndpoint, agentHeaders, agentWsUrl, type AgentTokens } from '../../../../../contract/agent-client.js';
import { endSession } from '../../browsers/service.js';
import { findLiveSessionById, type SessionRow } from '../../browsers/store.js';

/** The browsers of flows and health checks: reaching them over CDP, and closing them. */

export const NAVIGATION_TIMEOUT_MS = 30_000;
export const FLOW_SESSION_END_REASON = 'auth_flow_finished';

/** Straight to the agent's /cdp, with its token. */
export async function connect(session: SessionRow, tokens: AgentTokens): Promise<Browser> {
  if (!session.agent_url) throw new Error('the browser has no agent address');
  const agent = agentEndpoint(tokens, session.id, session.agent_url);
  return chromium.connectOverCDP(agentWsUrl(agent, '/cdp'), { timeout: NAVIGATION_TIMEOUT_MS, headers: agentHeaders(agent) });
}

export async function firstPage(browser: Browser): Promise<Page> {
  const context = browser.contexts()[0] ?? (await browser.newContext());
  return context.pages()[0] ?? (await context.newPage());
}

/** Ends a flow's or check's browser, if it still runs; saving the profile only when asked. */
export async function endFlowBrowser(deps: AppDeps, sessionId: string, saveProfile: boolean): Promise<void> {
  const row = await findLiveSessionById(deps.db, sessionId).catch(() => undefined);
  if (!row) return;
  await endSession(deps, row, FLOW_SESSION_END_REASON, { discardProfile: !saveProfile }).catch((error: unknown) =>
    deps.log.warn({ err: error, sessionId }, 'closing an auth flow’s browser failed'),
  );
}
