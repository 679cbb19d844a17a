import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import type { Duplex } from 'node:stream';
import { sendJson } from './http-json.js';
import { accessRefusal, bearerMatches, originRefusal, refuseUpgrade, UNAUTHORIZED } from './access.js';
import type { AgentError, AgentHealth, AgentSettingsAnswer, AgentShutdownAnswer } from '../../contract/agent-wire.js';
import type { LiveBrowserSettings } from '../../contract/launch-spec.js';
import { plainLiveSettings, plainShutdownRequest } from './plain-input.js';
import { CDP_PATH, VNC_PATH, WEBDRIVER_PATH, type AgentState, type UpgradeHandler } from './agent-state.js';
import { cdpGrantsOf } from './playwright/cdp-grants.js';

/**
 * The agent's one port: health, Chromium's /json/version with the WebSocket URL pointing
 * back at the agent, the WebSockets (CDP on /cdp, WebDriver BiDi on /webdriver, live view
 * as VNC on /vnc), fs and computer routes, POST /settings for settings changed on a
 * running browser, POST /reset for a pool release, and POST /shutdown for the runtime.
 * Every route needs the browser's agent token and refuses web pages (access.ts); only
 * GET /health answers without the token, and then only {status}.
 */

export { CDP_PATH, VNC_PATH, WEBDRIVER_PATH } from './agent-state.js';

/** Loaded on first use, so BiDi's mapper and the VNC bridge cost nothing until a client asks. */
const UPGRADES: Record<string, () => Promise<UpgradeHandler>> = {
  [WEBDRIVER_PATH]: async () => (await import('./bidi/upgrade.js')).handleBidiUpgrade,
  [VNC_PATH]: async () => (await import('./live/vnc.js')).handleVncUpgrade,
};

/** The longest GET /health?wait_ms= holds its answer while the browser starts. */
export const MAX_HEALTH_WAIT_MS = 5000;

export interface AgentServerOptions {
  /** Resolves once the phase is no longer 'starting' (ready, or given up): ends a waiting /health. */
  settled?: () => Promise<void>;
  /** Resolves once Chromium is spawned or the start settled: ends a /health waiting with until=spawned. */
  spawned?: () => Promise<void>;
}

export function createAgentServer(state: AgentState, log: Logger, options: AgentServerOptions = {}): http.Server {
  const server = http.createServer((request, response) => {
    route(state, request, response, options, log).catch((error: unknown) => {
      log.error({ err: error, url: request.url }, 'request failed');
      if (!response.headersSent) sendJson(response, 500, { code: 'internal_error', message: 'internal error' });
      else response.destroy();
    });
  });
  server.on('upgrade', (request: IncomingMessage, socket, head: Buffer) => {
    // Nothing else listens for the raw socket's errors until a handler takes it over (and
    // a handler may load lazily): a client reset must not become an unhandled 'error'.
    socket.on('error', () => socket.destroy());
    const refusal = accessRefusal(request, state.token);
    // A Playwright execution's own token opens /cdp and nothing else (playwright/cdp-grants.ts).
    if (refusal && !cdpGrantsOf(state).admits(request, socket)) return refuseUpgrade(socket, refusal);
    // The cookie baseline is read before any client is served (see reset.ts).
    void state.connections.admitted().then(() => {
      if (!socket.destroyed) upgrade(state, request, socket, head, log);
    });
  });
  return server;
}

function upgrade(state: AgentState, request: IncomingMessage, socket: Duplex, head: Buffer, log: Logger): void {
  // A reset is running: the next holder must not see a half-reset browser.
  if (!state.connections.accepting()) {
    socket.end('HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
    return;
  }
  const path = new URL(request.url ?? '/', 'http://agent').pathname;
  if (path === CDP_PATH) return state.bridge.handleUpgrade(request, socket, head);
  const load = UPGRADES[path];
  if (!load) {
    socket.end('HTTP/1.1 404 Not Found\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
    return;
  }
  load().then(
    (handle) => handle(state, request, socket, head, log),
    (error: unknown) => {
      log.error({ err: error, path }, 'WebSocket handler failed to load');
      socket.end('HTTP/1.1 500 Internal Server Error\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
    },
  );
}

async function route(state: AgentState, request: IncomingMessage, response: ServerResponse, options: AgentServerOptions, log: Logger): Promise<void> {
  const url = new URL(request.url ?? '/', 'http://agent');
  const path = url.pathname.replace(/\/+$/, '') || '/';
  const key = `${request.method} ${path}`;
  const refusal = originRefusal(request);
  if (refusal) return sendJson(response, refusal.status, { code: refusal.code, message: refusal.message });
  const authorized = bearerMatches(request.headers.authorization, state.token);
  if (key === 'GET /health') {
    const status = state.phase() === 'ready' ? 200 : 503;
    // Without the token, the phase alone, for kubelet probes (a probe's headers sit in
    // the pod spec, readable by far more people than the launch Secret). It does not
    // count as the service polling: a page must not keep an orphaned agent alive.
    if (!authorized) return sendJson(response, status, { status: state.phase() });
    state.healthPolled();
    // The runtime waits for the start here rather than polling: the answer leaves the
    // moment Chromium is ready, with no poll interval and no requests competing with
    // Chromium's start for the CPU.
    // until=spawned answers once Chromium's process exists: the runtime then lets the
    // service answer its caller while Chromium starts (requests made meanwhile wait below).
    const waitMs = healthWaitMs(url.searchParams.get('wait_ms'));
    const awaited = url.searchParams.get('until') === 'spawned' ? options.spawned : options.settled;
    if (waitMs > 0 && state.phase() === 'starting' && awaited && !(awaited === options.spawned && state.spawned())) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([awaited(), new Promise((resolve) => (timer = setTimeout(resolve, waitMs)))]);
      clearTimeout(timer);
    }
    return sendJson(response, state.phase() === 'ready' ? 200 : 503, health(state));
  }
  if (!authorized) return sendJson(response, UNAUTHORIZED.status, { code: UNAUTHORIZED.code, message: UNAUTHORIZED.message });
  // A request made while Chromium starts (the service answered its create at the spawn)
  // waits for the start to settle, then is served or refused as the outcome says.
  if (state.phase() === 'starting' && options.settled) await options.settled();
  if (key === 'GET /json/version') return jsonVersion(state, request, response);
  if (path.startsWith('/computer/')) return (await import('./computer/routes.js')).handleComputerRequest(state.chromium(), request, response, path);
  if (key === 'POST /settings') {
    if (state.phase() !== 'ready') return sendJson(response, 503, { code: 'not_ready', message: 'browser not ready' });
    const body = await readSettings(await readJson(request));
    if (!body.ok) return sendJson(response, 422, { code: 'settings_not_applied', message: body.message } satisfies AgentError);
    try {
      await state.applySettings(body.settings);
    } catch (error) {
      return sendJson(response, 422, { code: 'settings_not_applied', message: error instanceof Error ? error.message : String(error) } satisfies AgentError);
    }
    return sendJson(response, 200, { status: 'applied' } satisfies AgentSettingsAnswer);
  }
  if (key === 'POST /reset') return (await import('./reset.js')).handleResetRequest(state, request, response);
  if (key === 'POST /shutdown') {
    const raw = await readJson(request);
    const body = plainShutdownRequest(raw) ?? (await import('../../contract/agent-wire.js')).agentShutdownRequestSchema.parse(raw);
    sendJson(response, 202, { status: 'stopping' } satisfies AgentShutdownAnswer);
    // save_profile false: close without writing the profile back (default: as launched).
    state.requestShutdown('shutdown requested over HTTP', body.grace_ms, { saveProfile: body.save_profile !== false });
    return;
  }
  if (key === 'POST /playwright/execute') return (await import('./playwright/http.js')).handlePlaywrightRequest(state, request, response);
  if (path.startsWith('/fs/')) return (await import('./fs/http.js')).handleFsRequest(state, request, response);
  if (path.startsWith('/logs/')) return (await import('./logs/http.js')).handleLogsRequest(state, request, response);
  if (key === 'POST /extensions') return (await import('./extensions/http.js')).handleExtensionsRequest(state, request, response);
  if (key === 'POST /curl') return (await import('./curl/http.js')).handleCurlRequest(state, request, response);
  if (path.startsWith('/process/')) return (await import('./process/http.js')).handleProcessRequest(state, request, response);
  if (path === '/replays' || path.startsWith('/replays/')) return (await import('./replay/http.js')).handleReplaysRequest(state, request, response, path, log);
  sendJson(response, 404, { code: 'route_not_found', message: `no route for ${key}` });
}

/**
 * A plain body is read without zod (plain-input.ts); anything else through the contract's
 * schema, loaded then, which decides and words the error.
 */
async function readSettings(raw: unknown): Promise<{ ok: true; settings: LiveBrowserSettings } | { ok: false; message: string }> {
  const plain = plainLiveSettings(raw);
  if (plain) return { ok: true, settings: plain };
  const [{ agentSettingsRequestSchema }, { issuesText }] = await Promise.all([import('../../contract/agent-wire.js'), import('../../contract/launch-spec.js')]);
  const parsed = agentSettingsRequestSchema.safeParse(raw);
  return parsed.success ? { ok: true, settings: parsed.data } : { ok: false, message: issuesText(parsed.error, 'settings') };
}

/** GET /health's wait_ms: how long to hold the answer while the browser starts (0: answer at once). */
export function healthWaitMs(raw: string | null): number {
  const ms = Number(raw ?? 0);
  return Number.isFinite(ms) && ms > 0 ? Math.min(Math.floor(ms), MAX_HEALTH_WAIT_MS) : 0;
}

function health(state: AgentState): AgentHealth {
  const chromium = state.chromium();
  const activity = state.connections.activity();
  return {
    status: state.phase(),
    spawned: state.spawned(),
    browser_id: state.browserId,
    browser: chromium ? { version: chromium.version, pid: chromium.pid, sandbox: chromium.sandbox } : null,
    connections: activity.connections,
    connections_by_kind: activity.byKind,
    idle_since: activity.idleSince?.toISOString() ?? null,
  };
}

/** Chromium's answer, with the WebSocket URL rewritten to this agent as the client reached it. */
function jsonVersion(state: AgentState, request: IncomingMessage, response: ServerResponse): void {
  const chromium = state.chromium();
  if (state.phase() !== 'ready' || !chromium) return sendJson(response, 503, { code: 'not_ready', message: 'browser not ready' });
  const host = request.headers.host ?? `${request.socket.localAddress}:${request.socket.localPort}`;
  sendJson(response, 200, { ...chromium.versionInfo, webSocketDebuggerUrl: `ws://${host}${CDP_PATH}` });
}

async function readJson(request: IncomingMessage): Promise<Record<string, unknown>> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > 64 * 1024) break;
    chunks.push(chunk);
  }
  if (chunks.length === 0) return {};
  try {
    const parsed: unknown = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    return parsed && typeof parsed === 'object' ? (parsed as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}
