import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import WebSocket, { WebSocketServer, type RawData } from 'ws';
import type { ConnectionTracker } from './connections.js';

/**
 * CDP pass-through: each client WebSocket on /cdp gets its own WebSocket to Chromium's
 * browser endpoint, and frames are copied both ways untouched. Chromium multiplexes
 * clients itself, so the agent needs no knowledge of CDP. Clients are counted in the
 * agent's ConnectionTracker, because the service's idle timeout deletes a session nobody
 * is connected to.
 */

/** CDP screenshots and large evaluations exceed ws's 100 MiB default only rarely; be generous. */
const MAX_FRAME_BYTES = 512 * 1024 * 1024;

export class CdpBridge {
  private readonly server = new WebSocketServer({ noServer: true, perMessageDeflate: false, maxPayload: MAX_FRAME_BYTES });
  private readonly pairs = new Set<{ client: WebSocket; upstream: WebSocket }>();

  constructor(
    private readonly upstreamUrl: () => string | undefined,
    private readonly tracker: ConnectionTracker,
    private readonly log: Logger,
  ) {}

  /** Opens the upstream first, so a client is only accepted when Chromium took it. */
  handleUpgrade(request: IncomingMessage, socket: Duplex, head: Buffer): void {
    const target = this.upstreamUrl();
    if (!target) {
      socket.end('HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
      return;
    }
    const upstream = new WebSocket(target, { perMessageDeflate: false, maxPayload: MAX_FRAME_BYTES });
    upstream.once('error', (error) => {
      this.log.warn({ err: error }, 'CDP upstream connection failed');
      socket.end('HTTP/1.1 502 Bad Gateway\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
    });
    // A client that gives up while Chromium is being dialled must not leave an upstream open.
    const abandon = () => upstream.terminate();
    socket.once('close', abandon);
    upstream.once('open', () => {
      socket.off('close', abandon);
      this.server.handleUpgrade(request, socket, head, (client) => this.pipe(client, upstream));
    });
  }

  private pipe(client: WebSocket, upstream: WebSocket): void {
    const pair = { client, upstream };
    this.pairs.add(pair);
    // Upstream at once: the client must not reach Chromium again once asked to leave.
    const release = this.tracker.opened('cdp', () => {
      client.close(1001, 'the browser was reset for its next holder');
      upstream.terminate();
    });
    this.log.info({ connections: this.pairs.size }, 'CDP client connected');
    const forward = (to: WebSocket) => (data: RawData, isBinary: boolean) => {
      if (to.readyState === WebSocket.OPEN) to.send(data, { binary: isBinary });
    };
    client.on('message', forward(upstream));
    upstream.on('message', forward(client));
    let closed = false;
    const closeBoth = (code: number, reason: Buffer) => {
      if (closed) return;
      closed = true;
      this.pairs.delete(pair);
      release();
      this.log.info({ connections: this.pairs.size }, 'CDP client disconnected');
      // 1005/1006 are reserved: they may be observed but never sent.
      const sendable = code >= 1000 && code !== 1005 && code !== 1006 && code < 5000 ? code : 1000;
      for (const socket of [client, upstream]) {
        if (socket.readyState === WebSocket.OPEN) socket.close(sendable, reason);
        else if (socket.readyState === WebSocket.CONNECTING) socket.terminate();
      }
    };
    client.on('close', closeBoth);
    upstream.on('close', closeBoth);
    client.on('error', (error) => this.log.debug({ err: error }, 'CDP client socket error'));
    upstream.removeAllListeners('error');
    upstream.on('error', (error) => this.log.debug({ err: error }, 'CDP upstream socket error'));
  }

  /** Tells every client the browser is going away (1001), for shutdown. */
  closeAll(): void {
    for (const { client, upstream } of this.pairs) {
      client.close(1001, 'browser shutting down');
      upstream.terminate();
    }
  }
}
