import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebSocketServer } from 'ws';
import { expect } from 'vitest';
import {
  BrowserResetError,
  type BrowserLaunchSpec,
  type BrowserResetReport,
  type BrowserRuntime,
  type LiveBrowserSettings,
  type ObservedBrowser,
} from '../../contract/browser-runtime.js';
import { attachCdpProxy, type CdpProxy } from '../../api/src/modules/browsers/cdp-proxy.js';
import type { HttpClient } from '../support/http.js';
import type { TestApp } from '../support/test-app.js';

/**
 * A stand-in agent: /health like the real one ({connections, idle_since}) and a /cdp
 * WebSocket that echoes, so the proxy and the reaper can be tested without Chromium.
 * The browser tests run the real local runtime.
 */
export class FakeAgent {
  connections = 0;
  idleSince: Date | null = new Date();
  healthy = true;
  readonly server: Server;
  private readonly wss = new WebSocketServer({ noServer: true });

  constructor() {
    this.server = createServer((req, res) => {
      if (req.url === '/health' && this.healthy) {
        res.setHeader('content-type', 'application/json');
        res.end(JSON.stringify({ status: 'ready', connections: this.connections, idle_since: this.idleSince?.toISOString() ?? null }));
      } else {
        res.statusCode = 503;
        res.end();
      }
    });
    this.server.on('upgrade', (req, socket, head) => {
      if (req.url !== '/cdp') return socket.destroy();
      this.wss.handleUpgrade(req, socket, head, (ws) => {
        ws.on('message', (data, isBinary) => ws.send(data, { binary: isBinary }));
      });
    });
  }

  async listen(): Promise<string> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  async close(): Promise<void> {
    for (const c of this.wss.clients) c.terminate();
    this.server.closeAllConnections();
    await new Promise((resolve) => this.server.close(resolve));
  }
}

/** A runtime whose browsers are the fake agent; it records launches and terminations. */
export class FakeRuntime implements BrowserRuntime {
  readonly launched: BrowserLaunchSpec[] = [];
  readonly terminated: string[] = [];
  readonly settingsApplied: { browserId: string; settings: LiveBrowserSettings }[] = [];
  readonly resets: { browserId: string; startUrl?: string }[] = [];
  /** Set to make the next resets fail with this error (the service then replaces the browser). */
  failResetWith?: Error;
  readonly browsers = new Map<string, ObservedBrowser>();
  /** Set to make the next launches fail or hang. */
  mode: 'ready' | 'fail' | 'hang' = 'ready';

  constructor(private readonly agentUrl: string) {}

  async launch(spec: BrowserLaunchSpec, options: { signal: AbortSignal }): Promise<ObservedBrowser> {
    this.launched.push(spec);
    if (this.mode === 'hang') {
      await new Promise((_, reject) => options.signal.addEventListener('abort', () => reject(new Error('aborted'))));
    }
    const observed: ObservedBrowser =
      this.mode === 'fail'
        ? { browserId: spec.browserId, phase: 'Failed', reason: 'chromium exited with code 1', labels: spec.labels }
        : { browserId: spec.browserId, phase: 'Ready', agentUrl: this.agentUrl, startedAt: new Date(), labels: spec.labels };
    this.browsers.set(spec.browserId, observed);
    return observed;
  }
  observe(browserId: string): Promise<ObservedBrowser | undefined> {
    return Promise.resolve(this.browsers.get(browserId));
  }
  list(): Promise<ObservedBrowser[]> {
    return Promise.resolve([...this.browsers.values()]);
  }
  applySettings(browserId: string, settings: LiveBrowserSettings): Promise<void> {
    this.settingsApplied.push({ browserId, settings });
    return Promise.resolve();
  }
  reset(browserId: string, options: { startUrl?: string }): Promise<BrowserResetReport> {
    this.resets.push({ browserId, ...(options.startUrl !== undefined ? { startUrl: options.startUrl } : {}) });
    if (this.failResetWith) return Promise.reject(this.failResetWith);
    if (this.browsers.get(browserId)?.phase !== 'Ready') return Promise.reject(new BrowserResetError(`browser ${browserId} is not running`));
    return Promise.resolve({ closedConnections: 0, closedTargets: 0, disposedContexts: 0, cookiesRestored: 0 });
  }
  terminate(browserId: string): Promise<void> {
    this.terminated.push(browserId);
    this.browsers.delete(browserId);
    return Promise.resolve();
  }
}

/** Gives the app a runtime the way the composition root will (deps.runtime). */
export function useRuntime(app: TestApp, runtime: BrowserRuntime): void {
  Object.assign(app.deps, { runtime });
}

/** The CDP proxy on its own server (test-app does not attach it); `rewrite` points a cdp_ws_url at it. */
export async function startCdpProxy(app: TestApp): Promise<{ proxy: CdpProxy; rewrite(url: string): string; close(): Promise<void> }> {
  const server = createServer((_req, res) => {
    res.statusCode = 404;
    res.end();
  });
  const proxy = attachCdpProxy(server, app.deps);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    proxy,
    rewrite(url) {
      const u = new URL(url);
      u.host = `127.0.0.1:${port}`;
      return u.toString();
    },
    async close() {
      proxy.close();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

let seq = 0;
/** A fresh project of the tenant (optionally with a session cap) and a client acting in it. */
export async function newProject(http: HttpClient, limits?: { max_concurrent_sessions: number }) {
  const res = await http.post('/org/projects', { name: `browsers-${++seq}-${Date.now()}` });
  expect(res.status).toBe(200);
  if (limits) expect((await http.patch(`/org/projects/${res.body.id}/limits`, limits)).status).toBe(200);
  return { id: res.body.id as string, http: http.withHeaders({ 'X-Kernel-Project-Id': res.body.id }) };
}
