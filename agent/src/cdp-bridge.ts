import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import WebSocket, { WebSocketServer, type RawData } from 'ws';
import type { CdpMux, VirtualConnection } from './cdp/mux.js';
import type { ConnectionTracker } from './connections.js';
import { cdpClientOpened } from './telemetry/connection-events.js';

/**
 * CDP for clients: each client WebSocket on /cdp gets its own virtual connection on the
 * pipe to Chromium (cdp/mux.ts), which behaves like a WebSocket of its own to the browser
 * endpoint: its own sessions and events, none of another client's. Messages are JSON text
 * both ways. Clients are counted in the agent's ConnectionTracker, because the service's
 * idle timeout deletes a session nobody is connected to.
 */

/** CDP screenshots and large evaluations exceed ws's 100 MiB default only rarely; be generous. */
const MAX_FRAME_BYTES = 512 * 1024 * 1024;

export class CdpBridge {
  private readonly server = new WebSocketServer({ noServer: true, perMessageDeflate: false, maxPayload: MAX_FRAME_BYTES });
  /** Each open client, with what ends it (virtual connection first, then the WebSocket). */
  private readonly pairs = new Map<WebSocket, (code: number, reason: string) => void>();

  constructor(
    private readonly cdp: () => CdpMux | undefined,
    private readonly tracker: ConnectionTracker,
    private readonly log: Logger,
  ) {}

  /** Opens the virtual connection first, so a client is only accepted when Chromium took it. */
  handleUpgrade(request: IncomingMessage, socket: Duplex, head: Buffer): void {
    const mux = this.cdp();
    if (!mux) {
      socket.end('HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
      return;
    }
    // A client that gives up while Chromium attaches must not leave a connection open.
    let abandoned = false;
    const abandon = () => (abandoned = true);
    socket.once('close', abandon);
    mux.connect().then(
      (upstream) => {
        socket.off('close', abandon);
        if (abandoned || socket.destroyed) return upstream.close();
        this.server.handleUpgrade(request, socket, head, (client) => this.pipe(client, upstream));
      },
      (error: unknown) => {
        socket.off('close', abandon);
        this.log.warn({ err: error }, 'CDP upstream connection failed');
        socket.end('HTTP/1.1 502 Bad Gateway\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
      },
    );
  }

  private pipe(client: WebSocket, upstream: VirtualConnection): void {
    // Upstream at once (closeBoth): the client must not reach Chromium again once asked to leave.
    const release = this.tracker.opened('cdp', () => closeBoth(1001, 'the browser was reset for its next holder'));
    const telemetry = cdpClientOpened();
    client.on('message', (data: RawData) => {
      telemetry.message();
      upstream.send(text(data));
    });
    upstream.setOnMessage((message) => {
      telemetry.message();
      if (client.readyState === WebSocket.OPEN) client.send(message);
    });
    let closed = false;
    const closeBoth = (code: number, reason: string) => {
      if (closed) return;
      closed = true;
      this.pairs.delete(client);
      release();
      telemetry.closed(code === 1001 && reason === 'browser closed' ? 'upstream_changed' : code === 1001 ? 'context_cancelled' : 'client_close');
      this.log.info({ connections: this.pairs.size }, 'CDP client disconnected');
      upstream.close();
      // 1005/1006 are reserved: they may be observed but never sent.
      const sendable = code >= 1000 && code !== 1005 && code !== 1006 && code < 5000 ? code : 1000;
      if (client.readyState === WebSocket.OPEN) client.close(sendable, reason);
      else if (client.readyState === WebSocket.CONNECTING) client.terminate();
    };
    this.pairs.set(client, closeBoth);
    this.log.info({ connections: this.pairs.size }, 'CDP client connected');
    client.on('close', (code, reason) => closeBoth(code, reason.toString('utf8')));
    upstream.onClose(() => closeBoth(1001, 'browser closed'));
    client.on('error', (error) => this.log.debug({ err: error }, 'CDP client socket error'));
  }

  /** Tells every client the browser is going away (1001), for shutdown. */
  closeAll(): void {
    for (const closeBoth of [...this.pairs.values()]) closeBoth(1001, 'browser shutting down');
  }
}

function text(data: RawData): string {
  if (Buffer.isBuffer(data)) return data.toString('utf8');
  if (Array.isArray(data)) return Buffer.concat(data).toString('utf8');
  return Buffer.from(data).toString('utf8');
}
