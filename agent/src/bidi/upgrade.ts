import type { UpgradeHandler } from '../server.js';

/** Placeholder until WebDriver BiDi lands: refuses the upgrade with 501. */
export const handleBidiUpgrade: UpgradeHandler = (_state, _request, socket) => {
  socket.end('HTTP/1.1 501 Not Implemented\r\nConnection: close\r\nContent-Length: 0\r\n\r\n');
};
