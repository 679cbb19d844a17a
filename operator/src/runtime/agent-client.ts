import { createHmac, hkdfSync } from 'node:crypto';

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
