import { createHmac, hkdfSync } from 'node:crypto';
import { agentErrorMessage, readAgentHealth, readAgentResetReport, type AgentHealth, type AgentResetRequest, type AgentShutdownRequest } from './agent-wire.js';
import { BrowserResetError, BrowserSettingsError, type BrowserLaunchSpec, type BrowserResetReport, type BrowserRuntime, type LiveBrowserSettings, type ObservedBrowser } from './browser-runtime.js';

/**
 * How the service reaches a browser's agent. Every agent request must carry the browser's
 * agent token (`Authorization: Bearer <token>`, agent/src/access.ts): the agent listens on
 * 127.0.0.1 (a pod IP in Kubernetes), where any web page its Chromium or another session's
 * Chromium shows can reach it, so the port alone proves nothing.
 *
 * The token is derived, not stored: HMAC-SHA256 over the browser id with a key derived
 * (HKDF) from the service's encryption key (BROWSERPLANE_ENCRYPTION_KEY, which every API
 * replica and the operator share; in embedded mode the key file in the data dir, so a
 * restarted service still reaches the agents it re-adopts). Any replica computes it for a
 * session id, and nothing new is written to the database.
 */

/** One browser's agent as the service calls it. */
export interface AgentEndpoint {
  /** Base URL, no trailing slash: http://127.0.0.1:<port> or http://<pod IP>:9222. */
  url: string;
  token: string;
}

/** The agent token of a browser id. */
export type AgentTokens = (browserId: string) => string;

/** HKDF's info: a key of its own, so the agent tokens say nothing about the sealing key. */
const TOKEN_KEY_INFO = 'browserplane/agent-token/v1';

export function agentTokensFrom(encryptionKey: Buffer): AgentTokens {
  const key = Buffer.from(hkdfSync('sha256', encryptionKey, Buffer.alloc(0), TOKEN_KEY_INFO, 32));
  return (browserId) => createHmac('sha256', key).update(browserId, 'utf8').digest('base64url');
}

export function agentEndpoint(tokens: AgentTokens, browserId: string, url: string): AgentEndpoint {
  return { url: url.replace(/\/+$/, ''), token: tokens(browserId) };
}

/** The headers every request to the agent carries, `extra` first. */
export function agentHeaders(agent: Pick<AgentEndpoint, 'token'>, extra: Record<string, string> = {}): Record<string, string> {
  return { ...extra, authorization: `Bearer ${agent.token}` };
}

/** fetch() of an agent route (`path` starts with /), with its token. */
export function agentFetch(agent: AgentEndpoint, path: string, init: Omit<RequestInit, 'headers'> & { headers?: Record<string, string> } = {}): Promise<Response> {
  return fetch(`${agent.url}${path}`, { ...init, headers: agentHeaders(agent, init.headers) });
}

/** The ws:// URL of one of the agent's WebSockets (/cdp, /webdriver, /vnc). */
export function agentWsUrl(agent: AgentEndpoint, path: string): string {
  return `${agent.url.replace(/^http/, 'ws')}${path}`;
}

export type { AgentHealth } from './agent-wire.js';

/** GET /health, read through the wire schema (agent-wire.ts); undefined when the agent does not answer or answers no health. */
export async function fetchHealth(agent: AgentEndpoint, timeoutMs: number, options: { waitMs?: number } = {}): Promise<AgentHealth | undefined> {
  try {
    // wait_ms: an agent whose Chromium is starting answers once it is ready (or gave up), at most waitMs later.
    const query = options.waitMs ? `?wait_ms=${options.waitMs}` : '';
    const response = await agentFetch(agent, `/health${query}`, { signal: AbortSignal.timeout(timeoutMs + (options.waitMs ?? 0)) });
    return readAgentHealth(await response.json());
  } catch {
    return undefined;
  }
}

/**
 * Claims a standby agent (`standby`: its URL and standby token) for `spec`, handing it the
 * browser's agent token and the uid its Chromium runs as; false when it did not take it
 * (then it should be killed).
 */
export async function claimStandbyAgent(standby: AgentEndpoint, agentToken: string, spec: BrowserLaunchSpec, workDir: string, chromiumUid?: number): Promise<boolean> {
  try {
    const response = await fetch(`${standby.url}/start`, {
      method: 'POST',
      headers: agentHeaders(standby, { 'content-type': 'application/json' }),
      body: JSON.stringify({ spec, workDir, token: agentToken, ...(chromiumUid !== undefined ? { chromiumUid } : {}) }),
      signal: AbortSignal.timeout(2000),
    });
    await response.body?.cancel();
    return response.status === 202;
  } catch {
    return false;
  }
}

/** POST /settings: the agent applies them to the running browser or says why not. */
export async function postAgentSettings(agent: AgentEndpoint, settings: LiveBrowserSettings): Promise<{ ok: true } | { ok: false; message: string }> {
  try {
    const response = await agentFetch(agent, '/settings', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(settings),
      signal: AbortSignal.timeout(15_000),
    });
    const body: unknown = await response.json().catch(() => ({}));
    if (response.ok) return { ok: true };
    return { ok: false, message: agentErrorMessage(body, `the agent answered ${response.status}`) };
  } catch (error) {
    return { ok: false, message: `the agent did not answer: ${error instanceof Error ? error.message : String(error)}` };
  }
}

/** How long a reset may take before the browser is given up on (measured: well under 1 s). */
export const RESET_TIMEOUT_MS = 10_000;

/**
 * POST /reset: the agent makes the browser fit for its next holder and reports what it
 * did, or says why it could not (agent/src/reset.ts).
 */
export async function postAgentReset(
  agent: AgentEndpoint,
  options: { startUrl?: string; signal?: AbortSignal },
): Promise<{ ok: true; report: BrowserResetReport } | { ok: false; message: string }> {
  const signals = [AbortSignal.timeout(RESET_TIMEOUT_MS), ...(options.signal ? [options.signal] : [])];
  try {
    const response = await agentFetch(agent, '/reset', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify((options.startUrl !== undefined ? { start_url: options.startUrl } : {}) satisfies AgentResetRequest),
      signal: AbortSignal.any(signals),
    });
    const body: unknown = await response.json().catch(() => ({}));
    if (!response.ok) return { ok: false, message: agentErrorMessage(body, `the agent answered ${response.status}`) };
    return { ok: true, report: readAgentResetReport(body) };
  } catch (error) {
    return { ok: false, message: `the agent did not finish the reset: ${error instanceof Error ? error.message : String(error)}` };
  }
}

/** Asks the agent to close Chromium cleanly; false when it did not answer. */
export async function requestAgentShutdown(agent: AgentEndpoint, graceMs: number, options = { saveProfile: true }): Promise<boolean> {
  try {
    const response = await agentFetch(agent, '/shutdown', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ grace_ms: graceMs, save_profile: options.saveProfile } satisfies AgentShutdownRequest),
      signal: AbortSignal.timeout(1000),
    });
    await response.body?.cancel();
    return response.status === 202;
  } catch {
    return false;
  }
}

/**
 * The port's applySettings and reset for runtimes that place agents elsewhere (pods): the
 * agent is the same everywhere, so both ask it directly at the URL its browser is observed at.
 */
export function agentControls(observe: (browserId: string) => Promise<ObservedBrowser | undefined>, tokens: AgentTokens): Pick<BrowserRuntime, 'applySettings' | 'reset'> {
  const readyAgent = async (browserId: string, error: new (message: string) => Error): Promise<AgentEndpoint> => {
    const current = await observe(browserId);
    if (current?.phase !== 'Ready' || !current.agentUrl) throw new error(`browser ${browserId} is not running`);
    return { url: current.agentUrl, token: tokens(browserId) };
  };
  return {
    async applySettings(browserId, settings) {
      const answer = await postAgentSettings(await readyAgent(browserId, BrowserSettingsError), settings);
      if (!answer.ok) throw new BrowserSettingsError(answer.message);
    },
    async reset(browserId, { startUrl, signal }) {
      const answer = await postAgentReset(await readyAgent(browserId, BrowserResetError), {
        ...(startUrl !== undefined ? { startUrl } : {}),
        ...(signal ? { signal } : {}),
      });
      if (!answer.ok) throw new BrowserResetError(answer.message);
      return answer.report;
    },
  };
}
