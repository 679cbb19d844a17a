import http, { type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import type { BrowserAgent } from './agent.js';
import { bearerMatches, originRefusal } from './access.js';
import { parseChromiumUid, parseLaunchSpec, parseToken, type StandbyConfig } from './config.js';
import { sendJson } from './http-json.js';
import type { AgentHealth } from '../../contract/agent-wire.js';
import { reportPort } from '../../lib/port-file.js';

/**
 * Standby mode (AGENT_STANDBY=1, no AGENT_SPEC). Node's start and the agent's module
 * loading take 150-200 ms before an agent can even spawn Chromium, a third of a create
 * on this machine; a runtime keeps one agent ready in standby, so a create pays only for
 * Chromium. The standby loads every module of the launch path, listens on its port and
 * answers GET /health with status "standby"; POST /start {spec, workDir, token, chromiumUid?} with
 * `Authorization: Bearer <AGENT_STANDBY_TOKEN>` claims it: it answers 202, closes its
 * standby server and starts exactly like an agent started with AGENT_SPEC, on the same
 * port. The token matters: in embedded mode the agent runs as root and the claim names
 * the work dir it prepares (and hands to the browser user), so only the runtime that
 * started it, which alone knows the token, may claim it. The claim carries the browser's
 * agent token, which every request to the claimed agent must then present (access.ts);
 * requests from web pages are refused here as there.
 *
 * Nobody else will claim a standby whose runtime is gone, so it exits when its parent
 * process (AGENT_PARENT_PID, else the parent at start) is no longer its parent (the
 * service died and it was re-parented), and on SIGTERM or SIGINT.
 */

const MAX_START_BODY_BYTES = 1024 * 1024;
const PARENT_CHECK_MS = 1000;

export interface Claimed {
  agent: BrowserAgent;
}

export async function runStandby(
  config: StandbyConfig,
  token: string,
  log: Logger,
  onClaim: (browserId: string) => void,
  exit: (code: number) => void,
): Promise<Claimed> {
  // Everything the launch path imports, loaded now rather than on the clock of a create.
  const [{ BrowserAgent }] = await Promise.all([
    import('./agent.js'),
    import('./server.js'),
    import('./cdp-bridge.js'),
    import('./chromium.js'),
    import('./display.js'),
    import('./proxy.js'),
    import('ws'),
    // The proxy forwarder's server (proxy-chain: 50-500 ms of CPU to load), which an agent
    // loads about a second after its browser is ready: loaded here, it stalls nothing then.
    import('proxy-chain'),
  ]);
  // The runtime names itself: by the time this line runs, a runtime that died at once
  // would already have left us re-parented, and process.ppid would not tell.
  const parent = Number(process.env.AGENT_PARENT_PID) || process.ppid;
  const watchdog = setInterval(() => {
    if (process.ppid !== parent) {
      log.info({ parent }, 'standby agent: the runtime that started it is gone; exiting');
      exit(0);
    }
  }, PARENT_CHECK_MS);

  return new Promise<Claimed>((resolve, reject) => {
    let claimed = false;
    let listening: StandbyConfig = config;
    const server = http.createServer((request, response) => {
      const path = new URL(request.url ?? '/', 'http://agent').pathname;
      const refusal = originRefusal(request);
      if (refusal) return sendJson(response, refusal.status, { code: refusal.code, message: refusal.message });
      if (request.method === 'GET' && path === '/health') {
        return sendJson(response, 200, { status: claimed ? 'starting' : 'standby', browser_id: null, browser: null, connections: 0, idle_since: null } satisfies AgentHealth);
      }
      if (request.method === 'POST' && path === '/start' && !claimed) {
        if (!bearerMatches(request.headers.authorization, token)) {
          return sendJson(response, 401, { code: 'unauthorized', message: 'claiming a standby agent needs its token' });
        }
        void readBody(request).then(async (body) => {
          let spec;
          let workDir: unknown;
          let agentToken: string;
          let chromiumUid: number | undefined;
          try {
            const parsed = JSON.parse(body) as { spec?: unknown; workDir?: unknown; token?: unknown; chromiumUid?: unknown };
            spec = await parseLaunchSpec(parsed.spec);
            agentToken = parseToken(parsed.token, 'token (the browser\'s agent token, 32 to 256 URL-safe characters) is required');
            workDir = parsed.workDir;
            if (parsed.chromiumUid !== undefined) chromiumUid = parseChromiumUid(parsed.chromiumUid, 'chromiumUid');
            if (workDir !== undefined && typeof workDir !== 'string') throw new Error('workDir must be a string');
          } catch (error) {
            return sendJson(response, 400, { code: 'invalid_spec', message: error instanceof Error ? error.message : String(error) });
          }
          // Two claims may both have been read by now: the first one taken wins.
          if (claimed) return sendJson(response, 503, { code: 'not_ready', message: 'browser not ready' });
          claimed = true;
          clearInterval(watchdog);
          onClaim(spec.browserId);
          log.info('standby agent claimed');
          response.once('finish', () => {
            // The agent listens on the same port as soon as this server lets it go.
            server.close(() => {
              const agent = new BrowserAgent({ ...listening, spec, token: agentToken, workDir: workDir, ...(chromiumUid !== undefined ? { chromiumUid } : {}) }, log, exit);
              resolve({ agent });
              void agent.start().catch((error: unknown) => agent.abort(error));
            });
            server.closeAllConnections();
          });
          sendJson(response, 202, { status: 'starting' });
        }, () => sendJson(response, 400, { code: 'invalid_spec', message: 'the body could not be read' }));
        return;
      }
      sendJson(response, claimed ? 503 : 404, { code: claimed ? 'not_ready' : 'route_not_found', message: claimed ? 'browser not ready' : `no route for ${request.method} ${path}` });
    });
    server.once('error', (error) => {
      clearInterval(watchdog);
      reject(error);
    });
    server.listen(config.port, config.host, () => {
      const { address, port } = server.address() as AddressInfo;
      // The claimed agent takes over this very port (see /start), and reports nothing again.
      listening = { ...config, port, portFile: undefined };
      log.info({ host: address, port }, 'standby agent listening');
      if (config.portFile) reportPort(config.portFile, port).catch(reject);
    });
  });
}

function readBody(request: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    request.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_START_BODY_BYTES) request.destroy(new Error('body too large'));
      else chunks.push(chunk);
    });
    request.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    request.on('error', reject);
  });
}

