import { WebSocketServer } from 'ws';
import type { UpgradeHandler } from '../agent-state.js';
import { BidiMapperSession } from './mapper-session.js';
import { trackBidiClient } from './registry.js';

/**
 * WebDriver BiDi on the agent's /webdriver: each client WebSocket gets its own
 * chromium-bidi mapper (mapper-session.ts) over its own virtual CDP connection to this browser.
 * The mapper is started before the upgrade completes, so a client is only accepted when
 * it can be served (503 while the browser is not ready, 502 when the mapper cannot start).
 * Clients count as use of the browser for the idle timeout, like CDP and live view.
 *
 * browser.close from a BiDi client does what CDP Browser.close does: Chromium exits 0, the
 * agent ends cleanly with it, and the service's reaper ends the session on its next pass
 * as browser_gone. Tabs a client opened stay open when it leaves, as with CDP.
 */

/** As large as the service lets through (its proxy takes 256 MiB frames). */
const MAX_CLIENT_FRAME_BYTES = 256 * 1024 * 1024;

const server = new WebSocketServer({ noServer: true, perMessageDeflate: false, maxPayload: MAX_CLIENT_FRAME_BYTES });

export const handleBidiUpgrade: UpgradeHandler = (state, request, socket, head, log) => {
  // Node's HTTP server leaves an upgrade socket without an 'error' listener: a client
  // resetting the connection while the mapper starts (or while it is refused) would
  // otherwise be an uncaught exception, which ends the agent and the browser with it.
  const onSocketError = (error: Error) => log.debug({ err: error }, 'BiDi client socket error before the upgrade');
  socket.on('error', onSocketError);
  const cdp = state.chromium()?.cdp;
  if (state.phase() !== 'ready' || !cdp) {
    socket.end('HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
    return;
  }
  // A client that gives up while the mapper starts must not leave a mapper running.
  let abandoned = false;
  const abandon = () => (abandoned = true);
  socket.once('close', abandon);
  BidiMapperSession.start(cdp, log).then(
    (session) => {
      socket.off('close', abandon);
      if (abandoned || socket.destroyed) return session.close(1001, 'client left');
      // From here ws handles the socket's errors.
      socket.off('error', onSocketError);
      server.handleUpgrade(request, socket, head, (client) => {
        const release = state.connections.opened('webdriver', () => session.close(1001, 'the browser was reset for its next holder'));
        const untrack = trackBidiClient(session);
        client.once('close', () => {
          release();
          untrack();
          log.info({ connections: state.connections.activity().byKind.webdriver }, 'BiDi client disconnected');
        });
        session.attach(client);
        log.info({ connections: state.connections.activity().byKind.webdriver }, 'BiDi client connected');
      });
    },
    (error: unknown) => {
      socket.off('close', abandon);
      log.warn({ err: error }, 'BiDi mapper failed to start');
      socket.end('HTTP/1.1 502 Bad Gateway\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
    },
  );
};
