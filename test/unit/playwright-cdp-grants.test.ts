import type { IncomingMessage } from 'node:http';
import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { CdpGrants } from '../../agent/src/playwright/cdp-grants.js';
import { CappedOutput } from '../../agent/src/playwright/output.js';

/** A Playwright execution's CDP token (agent/src/playwright/cdp-grants.ts): requests are plain objects, sockets are streams. */

function upgrade(url: string, token: string, headers: Record<string, string> = {}): IncomingMessage {
  return { url, headers: { host: '127.0.0.1:9222', authorization: `Bearer ${token}`, ...headers } } as unknown as IncomingMessage;
}

describe('an execution\'s CDP grant', () => {
  it('opens /cdp and nothing else: not WebDriver, not live view, not another path', () => {
    const grants = new CdpGrants();
    const { token } = grants.mint();
    expect(grants.admits(upgrade('/cdp', token), new PassThrough())).toBe(true);
    expect(grants.admits(upgrade('/cdp?x=1', token), new PassThrough())).toBe(true);
    for (const url of ['/webdriver', '/vnc', '/fs/read_file', '/shutdown', '/cdp/x']) expect(grants.admits(upgrade(url, token), new PassThrough())).toBe(false);
  });

  it('is refused from a web page or under a DNS name, like the agent token', () => {
    const grants = new CdpGrants();
    const { token } = grants.mint();
    expect(grants.admits(upgrade('/cdp', token, { origin: 'http://evil.test' }), new PassThrough())).toBe(false);
    expect(grants.admits(upgrade('/cdp', token, { 'sec-fetch-site': 'cross-site' }), new PassThrough())).toBe(false);
    expect(grants.admits(upgrade('/cdp', token, { host: 'rebound.evil.test:9222' }), new PassThrough())).toBe(false);
  });

  it('admits no other token, and none once revoked; revoking closes what it opened', () => {
    const grants = new CdpGrants();
    const first = grants.mint();
    const second = grants.mint();
    expect(first.token).not.toBe(second.token);
    expect(grants.admits(upgrade('/cdp', 'not-a-grant'), new PassThrough())).toBe(false);
    const socket = new PassThrough();
    expect(grants.admits(upgrade('/cdp', first.token), socket)).toBe(true);
    first.revoke();
    expect(socket.destroyed).toBe(true);
    expect(grants.admits(upgrade('/cdp', first.token), new PassThrough())).toBe(false);
    expect(grants.admits(upgrade('/cdp', second.token), new PassThrough())).toBe(true);
  });
});

describe('captured output', () => {
  it('keeps the first bytes up to the cap and says how many more were dropped', () => {
    const output = new CappedOutput('stdout', 10);
    output.add(Buffer.from('0123456'));
    output.add(Buffer.from('789abcdef'));
    expect(output.text()).toBe('0123456789\n[stdout truncated: 6 more bytes after the first 10 were dropped]\n');
    const small = new CappedOutput('stderr', 10);
    small.add(Buffer.from('short'));
    expect(small.text()).toBe('short');
  });
});
