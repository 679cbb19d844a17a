import type { IncomingMessage, Server } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocket, WebSocketServer, type RawData } from 'ws';
import type { AppDeps } from '../../app-deps.js';
import { createCdpTokens, tokenSubject, type TokenCheck } from './cdp-token.js';
import { asksReadOnly, checkLiveViewToken, fullAccess } from './live-view-access.js';
import { findLiveSessionById } from './store.js';
import { agentEndpoint, agentHeaders, agentWsUrl, type AgentEndpoint } from '../../../../contract/agent-client.js';

/**
 * The browser's WebSockets through the service: `/browsers/{id}/cdp?token=…` (CDP),
 * `/browsers/{id}/webdriver?token=…` (WebDriver BiDi) and `/browsers/{id}/vnc?token=…`
 * (the live view's VNC stream) are checked (token, then a live session) before the
 * upgrade completes, then piped frame by frame to the agent's endpoint of the same name.
 * Every one counts as use of the session for the idle timeout. Express routes cannot
 * take upgrades, so this listens on the HTTP server.
 */

const PATH = /^\/browsers\/([^/]+)\/(cdp|webdriver|vnc)$/;
type Kind = 'cdp' | 'webdriver' | 'vnc';
const AGENT_CONNECT_TIMEOUT_MS = 10_000;

/** Open proxied connections per session and when the last one closed, for the idle reaper. */
export class CdpConnections {
  private readonly open = new Map<string, number>();
  private readonly lastClosed = new Map<string, Date>();

  opened(sessionId: string): void {
    this.open.set(sessionId, (this.open.get(sessionId) ?? 0) + 1);
  }
  closed(sessionId: string, at: Date): void {
    const left = (this.open.get(sessionId) ?? 1) - 1;
    if (left > 0) this.open.set(sessionId, left);
    else this.open.delete(sessionId);
    this.lastClosed.set(sessionId, at);
  }
  count(sessionId: string): number {
    return this.open.get(sessionId) ?? 0;
  }
  lastClosedAt(sessionId: string): Date | undefined {
    return this.lastClosed.get(sessionId);
  }
  forget(sessionId: string): void {
    this.lastClosed.delete(sessionId);
  }
  /**
   * Forgets sessions that are not live and have nothing open. Sessions end by many paths
   * (DELETE, a pool's release or delete, the reaper), and only the reaper calls forget(), so
   * without this every other ended session kept its entry for the life of the process.
   */
  retainOnly(liveIds: ReadonlySet<string>): void {
    for (const id of this.lastClosed.keys()) if (!liveIds.has(id) && !this.open.has(id)) this.lastClosed.delete(id);
  }
}

export interface CdpProxy {
  connections: CdpConnections;
  /** Stops taking upgrades and closes every proxied connection. */
  close(): void;
}

const REFUSALS: Record<Exclude<TokenCheck, 'ok'>, [number, string]> = {
  malformed: [401, 'the token is missing or malformed'],
  expired: [401, 'the token has expired; read the session again for a fresh cdp_ws_url'],
  bad_signature: [403, 'the token is not valid for this session'],
};

export function attachCdpProxy(server: Server, deps: AppDeps, options: { connections?: CdpConnections } = {}): CdpProxy {
  const tokens = createCdpTokens(deps);
  const connections = options.connections ?? new CdpConnections();
  const wss = new WebSocketServer({ noServer: true, perMessageDeflate: false, maxPayload: 256 * 1024 * 1024 });
  const sockets = new Set<WebSocket>();

  const onUpgrade = (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    // Until ws takes the socket over, nothing else listens for its errors: a client that
    // resets the connection during the token check or the agent dial would otherwise
    // raise an unhandled 'error' event and bring the service down.
    socket.on('error', () => socket.destroy());
    const url = new URL(req.url ?? '/', 'http://service');
    const match = PATH.exec(url.pathname);
    if (!match) return refuse(socket, 404, 'route_not_found', 'No WebSocket endpoint at this path');
    // Decoded here, outside the promise: a URIError thrown in this listener would be
    // uncaught and bring the whole service down for one unauthenticated request.
    const sessionId = decodePathSegment(match[1]!);
    if (sessionId === undefined) return refuse(socket, 400, 'invalid_path', 'The request path is not valid percent-encoded UTF-8');
    handle(sessionId, match[2] as Kind, url, req, socket, head).catch((error: unknown) => {
      deps.log.error({ err: error }, 'CDP proxy failed');
      refuse(socket, 500, 'internal_error', 'The connection could not be set up');
    });
  };

  async function handle(sessionId: string, kind: Kind, url: URL, req: IncomingMessage, socket: Duplex, head: Buffer) {
    // The token is checked before anything about the session is told: against its lease
    // when it exists (tokenSubject), else against the bare id, which fails alike.
    const session = await findLiveSessionById(deps.db, sessionId);
    const subject = session ? tokenSubject(session) : sessionId;
    const token = url.searchParams.get('token') ?? '';
    // The live view also takes a read-only token (live-view-access.ts); CDP and WebDriver never do.
    const access = kind === 'vnc' ? await checkLiveViewToken(tokens, subject, token) : fullAccess(await tokens.verify(subject, token));
    if (access.check !== 'ok') {
      const [status, message] = REFUSALS[access.check];
      return refuse(socket, status, status === 401 ? 'unauthorized' : 'forbidden', message);
    }
    // Input is dropped by the agent's view-only x11vnc, past anything the client controls.
    const viewOnly = kind === 'vnc' && (access.readOnly || asksReadOnly(url.searchParams.get('readOnly')));
    if (!session) return refuse(socket, 404, 'not_found', `Browser session ${JSON.stringify(sessionId)} was not found`);
    if (!session.agent_url) return refuse(socket, 409, 'browser_not_ready', 'The browser is still starting');

    const upstream = await connectAgent(agentEndpoint(deps.agentTokens, session.id, session.agent_url), viewOnly ? '/vnc?view_only=1' : `/${kind}`).catch((error: unknown) => {
      deps.log.warn({ err: error, sessionId, kind }, 'the agent refused the WebSocket connection');
      return error instanceof AgentRefusal ? error : undefined;
    });
    // The agent's own refusal that means something to the client (a headless browser has
    // no screen for /vnc) passes through; anything else is the browser being unreachable.
    if (upstream instanceof AgentRefusal && upstream.status === 409) {
      return refuse(socket, 409, 'live_view_unavailable', 'This session is headless: it has no screen to show');
    }
    if (!upstream || upstream instanceof AgentRefusal) return refuse(socket, 502, 'browser_unreachable', 'The browser did not accept the connection');
    wss.handleUpgrade(req, socket, head, (client) => {
      sockets.add(client);
      connections.opened(sessionId);
      pipe(client, upstream);
      client.once('close', () => {
        sockets.delete(client);
        connections.closed(sessionId, deps.clock.now());
      });
    });
  }

  server.on('upgrade', onUpgrade);
  return {
    connections,
    close() {
      server.off('upgrade', onUpgrade);
      for (const s of sockets) s.terminate();
      wss.close();
    },
  };
}

function decodePathSegment(segment: string): string | undefined {
  try {
    return decodeURIComponent(segment);
  } catch {
    return undefined;
  }
}

/** The agent answered the upgrade with an HTTP status instead of switching protocols. */
class AgentRefusal extends Error {
  constructor(readonly status: number) {
    super(`the agent answered ${status}`);
  }
}

/**
 * A new connection to the agent, made by the service: it carries the agent token and
 * nothing of the client's handshake (no Origin, Cookie or Authorization of theirs).
 */
function connectAgent(agent: AgentEndpoint, path: string): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(agentWsUrl(agent, path), {
      perMessageDeflate: false,
      maxPayload: 256 * 1024 * 1024,
      handshakeTimeout: AGENT_CONNECT_TIMEOUT_MS,
      headers: agentHeaders(agent),
    });
    ws.once('unexpected-response', (request, response) => {
      response.resume();
      request.destroy();
      reject(new AgentRefusal(response.statusCode ?? 502));
    });
    ws.once('open', () => {
      ws.off('error', reject);
      resolve(ws);
    });
    ws.once('error', reject);
  });
}

/** Frames pass as they are (text stays text); either side closing closes the other. */
function pipe(a: WebSocket, b: WebSocket): void {
  const forward = (to: WebSocket) => (data: RawData, isBinary: boolean) => {
    if (to.readyState === WebSocket.OPEN) to.send(data, { binary: isBinary });
  };
  a.on('message', forward(b));
  b.on('message', forward(a));
  const closeOther = (other: WebSocket) => (code: number, reason: Buffer) => {
    if (other.readyState === WebSocket.OPEN || other.readyState === WebSocket.CONNECTING) {
      other.close(code >= 1000 && code < 5000 && code !== 1005 && code !== 1006 ? code : 1000, reason);
    }
  };
  a.on('close', closeOther(b));
  b.on('close', closeOther(a));
  // An error is followed by close, which tears the pair down.
  a.on('error', () => a.terminate());
  b.on('error', () => b.terminate());
}

function refuse(socket: Duplex, status: number, code: string, message: string): void {
  if (socket.destroyed) return;
  const body = JSON.stringify({ code, message, details: [] });
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_TEXT[status] ?? 'Error'}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}

const STATUS_TEXT: Record<number, string> = {
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  409: 'Conflict',
  500: 'Internal Server Error',
  501: 'Not Implemented',
  502: 'Bad Gateway',
};
