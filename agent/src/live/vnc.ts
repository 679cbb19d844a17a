import type { IncomingMessage } from 'node:http';
import type net from 'node:net';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import WebSocket, { WebSocketServer, type RawData } from 'ws';
import type { ConnectionTracker } from '../connections.js';
import type { UpgradeHandler } from '../agent-state.js';
import { vncServerFor } from './vnc-server.js';
import { liveViewOpened } from '../telemetry/connection-events.js';

/**
 * The live view's transport: each WebSocket client on /vnc gets its own RFB connection
 * to the browser's x11vnc, and raw RFB bytes travel as binary frames both ways, which
 * is what noVNC speaks (the websockify convention). Every client counts as a
 * `live_view` connection for the idle timeout. Headless browsers have no screen to
 * show: 409. `/vnc?view_only=1` reaches a second x11vnc of the same screen started with
 * -viewonly, which drops every key, pointer and clipboard message whatever the client sends.
 */

/** RFB from a viewer is small (input events, update requests); a framebuffer update goes the other way. */
const MAX_CLIENT_FRAME_BYTES = 1024 * 1024;
/** Past this much unsent data to a slow viewer, stop reading from x11vnc until it drains. */
const HIGH_WATER_BYTES = 4 * 1024 * 1024;

const wss = new WebSocketServer({ noServer: true, perMessageDeflate: false, maxPayload: MAX_CLIENT_FRAME_BYTES });

export const handleVncUpgrade: UpgradeHandler = (state, request, socket, head, log) => {
  const chromium = state.chromium();
  if (state.phase() !== 'ready' || !chromium) return refuse(socket, 503, 'browser not ready');
  if (!chromium.display) return refuse(socket, 409, 'a headless browser has no screen to show; live view needs a headful session');
  // view_only=1: the service's read-only live view (readOnly=true, or a read-only token).
  const viewOnly = new URL(request.url ?? '/', 'http://agent').searchParams.get('view_only') === '1';
  vncServerFor(chromium.display, log, viewOnly)
    .then((server) => server.connect())
    .then(
      (upstream) => accept(request, socket, head, upstream, state.connections, log),
      (error: unknown) => {
        log.error({ err: error }, 'live view: x11vnc is not available');
        refuse(socket, 502, 'the live view server could not be started');
      },
    );
};

function accept(request: IncomingMessage, socket: Duplex, head: Buffer, upstream: net.Socket, tracker: ConnectionTracker, log: Logger): void {
  // The viewer may have given up while x11vnc was starting.
  if (socket.destroyed) {
    upstream.destroy();
    return;
  }
  wss.handleUpgrade(request, socket, head, (client) => bridge(client, upstream, tracker, log));
}

function bridge(client: WebSocket, upstream: net.Socket, tracker: ConnectionTracker, log: Logger): void {
  const release = tracker.opened('live_view', () => close('the browser was reset for its next holder'));
  const viewer = liveViewOpened();
  log.info({ live_view: tracker.activity().byKind.live_view }, 'live view client connected');
  upstream.on('data', (chunk: Buffer) => {
    if (client.readyState !== WebSocket.OPEN) return;
    client.send(chunk, { binary: true }, () => {
      if (upstream.isPaused() && client.bufferedAmount < HIGH_WATER_BYTES / 2) upstream.resume();
    });
    if (client.bufferedAmount > HIGH_WATER_BYTES) upstream.pause();
  });
  client.on('message', (data: RawData) => {
    if (!upstream.destroyed) upstream.write(Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data as Buffer));
  });
  let closed = false;
  const close = (reason: string) => {
    if (closed) return;
    closed = true;
    release();
    viewer.closed();
    upstream.destroy();
    // 1001: x11vnc or the browser went away; the viewer shows that the session ended.
    if (client.readyState === WebSocket.OPEN) client.close(1001, reason);
    else if (client.readyState === WebSocket.CONNECTING) client.terminate();
    log.info({ live_view: tracker.activity().byKind.live_view, reason }, 'live view client disconnected');
  };
  client.on('close', () => close('viewer left'));
  upstream.on('close', () => close('live view server closed the connection'));
  client.on('error', (error) => log.debug({ err: error }, 'live view client socket error'));
  upstream.on('error', (error) => log.debug({ err: error }, 'live view upstream socket error'));
}

function refuse(socket: Duplex, status: number, message: string): void {
  const text = { 409: 'Conflict', 502: 'Bad Gateway', 503: 'Service Unavailable' }[status] ?? 'Error';
  const body = JSON.stringify({ code: status === 409 ? 'live_view_unavailable' : 'live_view_failed', message });
  socket.end(`HTTP/1.1 ${status} ${text}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
}
