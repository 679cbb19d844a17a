import { spawn } from 'node:child_process';
import { createServer, connect, type AddressInfo, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { loopbackPeerUid } from '../../agent/src/peer-uid.js';

/** Real sockets and, as root, a real second user (setpriv to nobody, 65534). */

const servers: ReturnType<typeof createServer>[] = [];
afterEach(() => {
  for (const server of servers.splice(0)) server.close();
});

async function acceptOne(host: string, dial: (port: number) => void): Promise<Socket> {
  const server = createServer();
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  const accepted = new Promise<Socket>((resolve) => server.once('connection', resolve));
  dial((server.address() as AddressInfo).port);
  return accepted;
}

describe('the owner of a loopback connection’s other end', () => {
  it('is our own uid for our own connection, from any 127/8 address', async () => {
    const own = await acceptOne('127.0.0.1', (port) => connect({ port, host: '127.0.0.1', localAddress: '127.0.0.7' }));
    expect(own.remoteAddress).toBe('127.0.0.7');
    expect(await loopbackPeerUid(own)).toBe(process.getuid!());
    own.destroy();
  });

  it.runIf(process.getuid?.() === 0)('is the other user for a process of another user', async () => {
    let child: ReturnType<typeof spawn> | undefined;
    const other = await acceptOne('127.0.0.1', (port) => {
      child = spawn('setpriv', ['--reuid=65534', '--regid=65534', '--clear-groups', process.execPath, '-e', `require('net').connect(${port}, '127.0.0.1'); setTimeout(() => {}, 5000)`], { stdio: 'ignore' });
    });
    expect(await loopbackPeerUid(other)).toBe(65534);
    other.destroy();
    child?.kill();
  });
});
