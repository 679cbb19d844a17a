import { chromium } from 'playwright-core';
import type { AppDeps } from '../../app-deps.js';
import { agentEndpoint, agentHeaders, agentWsUrl } from '../../../../contract/agent-client.js';
import type { SessionRow } from './store.js';

/** Longest a PATCH waits for the page to start loading: the SDK documents the navigation as best effort. */
export const NAVIGATE_TIMEOUT_MS = 15_000;

/**
 * PATCH start_url: the running browser's first tab goes to the URL, as Kernel does after
 * an update. It goes through the agent's CDP, so the page loads through the browser's
 * own proxy and egress rules like any navigation the caller makes. Unlike a pool
 * release (the agent's /reset), the browser keeps its tabs, cookies and storage.
 * Returns why it did not navigate, or undefined when the page committed to the URL.
 */
export async function navigateFirstTab(deps: Pick<AppDeps, 'agentTokens'>, row: SessionRow, url: string): Promise<string | undefined> {
  if (row.phase !== 'running' || !row.agent_url) return 'the browser is not running';
  const agent = agentEndpoint(deps.agentTokens, row.id, row.agent_url);
  let browser;
  try {
    browser = await chromium.connectOverCDP(agentWsUrl(agent, '/cdp'), { timeout: NAVIGATE_TIMEOUT_MS, headers: agentHeaders(agent) });
    const context = browser.contexts()[0] ?? (await browser.newContext());
    const page = context.pages()[0] ?? (await context.newPage());
    await page.goto(url, { waitUntil: 'commit', timeout: NAVIGATE_TIMEOUT_MS });
    return undefined;
  } catch (error) {
    return error instanceof Error ? error.message : String(error);
  } finally {
    // Disconnects this CDP client only: the browser and its pages stay.
    await browser?.close().catch(() => undefined);
  }
}
