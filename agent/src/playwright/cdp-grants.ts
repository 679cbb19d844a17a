import { randomBytes } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { bearerMatches, originRefusal } from '../access.js';
import { CDP_PATH, type AgentState } from '../agent-state.js';

/**
 * The CDP credentials of Playwright executions. The code runs as the caller wrote it and
 * reads whatever its process holds, so its connection to /cdp must not use the agent
 * token: with that it could call /shutdown, /reset and /settings, and the files API.
 * Each execution gets a token of its own instead, good for one thing, a WebSocket
 * upgrade on /cdp (from no web page, as for the agent token), and only until the
 * execution ends: revoking it also closes every connection it opened.
 */

export interface CdpGrant {
  token: string;
  revoke: () => void;
}

export class CdpGrants {
  /** Live tokens, each with the sockets upgraded with it. */
  private readonly live = new Map<string, Set<Duplex>>();

  mint(): CdpGrant {
    const token = randomBytes(32).toString('base64url');
    const sockets = new Set<Duplex>();
    this.live.set(token, sockets);
    return {
      token,
      revoke: () => {
        this.live.delete(token);
        for (const socket of sockets) socket.destroy();
        sockets.clear();
      },
    };
  }

  /** Whether `request` is a CDP upgrade with a live grant; the socket then closes with the grant. */
  admits(request: IncomingMessage, socket: Duplex): boolean {
    if (new URL(request.url ?? '/', 'http://agent').pathname !== CDP_PATH || originRefusal(request)) return false;
    for (const [token, sockets] of this.live) {
      if (!bearerMatches(request.headers.authorization, token)) continue;
      sockets.add(socket);
      socket.once('close', () => sockets.delete(socket));
      return true;
    }
    return false;
  }
}

const grants = new WeakMap<AgentState, CdpGrants>();

/** The grants of one agent (a WeakMap, like the fs routes' context: AgentState stays as agent.ts fills it). */
export function cdpGrantsOf(state: AgentState): CdpGrants {
  let found = grants.get(state);
  if (!found) grants.set(state, (found = new CdpGrants()));
  return found;
}
