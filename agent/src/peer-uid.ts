import { readFile } from 'node:fs/promises';
import type { Socket } from 'node:net';

/**
 * The uid that owns the other end of a loopback TCP connection, from /proc/net/tcp (the
 * kernel lists both ends of a local connection there, each with its socket's owner).
 * Undefined when it cannot be told (not Linux, not IPv4, the peer already gone).
 *
 * The forwarder uses it to serve only Chromium's user: it adds the session's upstream
 * credentials to whatever connects, and any local process can connect to 127.0.0.1.
 */
export async function loopbackPeerUid(socket: Socket): Promise<number | undefined> {
  const { remoteAddress, remotePort, localAddress, localPort } = socket;
  if (!remoteAddress || !remotePort || !localAddress || !localPort) return undefined;
  const peer = `${hexAddress(remoteAddress)}:${hexPort(remotePort)}`;
  const us = `${hexAddress(localAddress)}:${hexPort(localPort)}`;
  if (peer.startsWith('?') || us.startsWith('?')) return undefined;
  const table = await readFile('/proc/net/tcp', 'latin1').catch(() => '');
  const at = table.indexOf(` ${peer} ${us} `);
  if (at < 0) return undefined;
  // From here: local_address rem_address st tx:rx tr:when retrnsmt uid ...
  const fields = table.slice(at, table.indexOf('\n', at)).trim().split(/\s+/);
  const uid = Number(fields[6]);
  return Number.isInteger(uid) ? uid : undefined;
}

/** 127.0.0.1 → 0100007F: the address as the kernel's 32-bit word, printed in host (little-endian) order. */
function hexAddress(address: string): string {
  const v4 = address.replace(/^::ffff:/, '');
  const parts = v4.split('.').map(Number);
  if (parts.length !== 4 || parts.some((part) => !Number.isInteger(part) || part < 0 || part > 255)) return '?';
  return parts
    .reverse()
    .map((part) => part.toString(16).padStart(2, '0'))
    .join('')
    .toUpperCase();
}

function hexPort(port: number): string {
  return port.toString(16).padStart(4, '0').toUpperCase();
}
