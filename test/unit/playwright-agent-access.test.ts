import http, { type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import type { AgentState } from '../../agent/src/agent-state.js';
import { cdpGrantsOf } from '../../agent/src/playwright/cdp-grants.js';
import { createAgentServer } from '../../agent/src/server.js';

/**
 * The agent's real server with a stub of the running browser: the CDP bridge answers 418
 * instead of taking the socket, so a test sees which upgrades reach it. What an
 * execution's token opens, and what it does not.
 */

const AGENT_TOKEN = 'a'.repeat(40);
let server: Server | undefined;
afterEach(() => server?.close());

function stubState(): { state: AgentState; shutdowns: string[] } {
  const shutdowns: string[] = [];
  const state = {
    browserId: 'b1',
    token: AGENT_TOKEN,
    phase: () => 'ready',
    chromium: () => undefined,
    bridge: { handleUpgrade: (_request: unknown, socket: Duplex) => socket.end('HTTP/1.1 418 Bridge\r\nContent-Length: 0\r\nConnection: close\r\n\r\n') },
    connections: { admitted: () => Promise.resolve(), accepting: () => true },
    healthPolled: () => undefined,
    applySettings: () => Promise.resolve(),
    reset: () => Promise.reject(new Error('no reset here')),
    requestShutdown: (reason: string) => shutdowns.push(reason),
  } as unknown as AgentState;
  return { state, shutdowns };
}

async function listen(state: AgentState): Promise<number> {
  server = createAgentServer(state, pino({ level: 'silent' }));
  await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
  return (server.address() as AddressInfo).port;
}

/** The status of a WebSocket upgrade request (101 is never reached: the stub bridge answers 418). */
function upgradeStatus(port: number, path: string, token: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const request = http.request({
      host: '127.0.0.1',
      port,
      path,
      headers: { connection: 'Upgrade', upgrade: 'websocket', 'sec-websocket-version': '13', 'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==', authorization: `Bearer ${token}` },
    });
    request.on('response', (response) => {
      response.resume();
      resolve(response.statusCode ?? 0);
    });
    request.on('upgrade', () => reject(new Error('upgraded')));
    request.on('error', reject);
    request.end();
  });
}

describe('a Playwright execution\'s token on the agent\'s port', () => {
  it('opens /cdp while the execution lives, and no route, other WebSocket or, once revoked, /cdp', async () => {
    const { state, shutdowns } = stubState();
    const port = await listen(state);
    const grant = cdpGrantsOf(state).mint();
    expect(await upgradeStatus(port, '/cdp', grant.token)).toBe(418);
    expect(await upgradeStatus(port, '/webdriver', grant.token)).toBe(401);
    expect(await upgradeStatus(port, '/vnc', grant.token)).toBe(401);
    for (const [method, path] of [['POST', '/shutdown'], ['POST', '/reset'], ['POST', '/settings'], ['GET', '/fs/list_files?path=/'], ['GET', '/json/version'], ['POST', '/playwright/execute']] as const) {
      const res = await fetch(`http://127.0.0.1:${port}${path}`, { method, headers: { authorization: `Bearer ${grant.token}`, 'content-type': 'application/json' }, ...(method === 'POST' ? { body: '{}' } : {}) });
      expect(res.status, `${method} ${path}`).toBe(401);
    }
    expect(shutdowns).toEqual([]);
    grant.revoke();
    expect(await upgradeStatus(port, '/cdp', grant.token)).toBe(401);
    expect(await upgradeStatus(port, '/cdp', AGENT_TOKEN)).toBe(418);
  });
});
