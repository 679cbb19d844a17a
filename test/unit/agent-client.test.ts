import { describe, expect, it } from 'vitest';
import { agentEndpoint, agentHeaders, agentTokensFrom, agentWsUrl } from '../../contract/agent-client.js';

// The agent token: derived from the service's encryption key and the browser id, so every
// replica and the operator compute the same one and nothing is stored.

describe('agent tokens', () => {
  const key = Buffer.alloc(32, 1);

  it('are the same for the same key and browser, whoever computes them', () => {
    expect(agentTokensFrom(key)('bs_one')).toBe(agentTokensFrom(Buffer.from(key))('bs_one'));
  });

  it('differ between browsers and between keys, and are URL-safe strings the agent accepts', () => {
    const tokens = agentTokensFrom(key);
    const seen = new Set([tokens('bs_one'), tokens('bs_two'), tokens('bs_one '), agentTokensFrom(Buffer.alloc(32, 2))('bs_one')]);
    expect(seen.size).toBe(4);
    for (const token of seen) expect(token).toMatch(/^[A-Za-z0-9_-]{43}$/);
  });

  it('are not the key, nor the HMAC of the id under the key itself (HKDF gives them a key of their own)', async () => {
    const { createHmac } = await import('node:crypto');
    const token = agentTokensFrom(key)('bs_one');
    expect(token).not.toBe(createHmac('sha256', key).update('bs_one').digest('base64url'));
    expect(Buffer.from(token, 'base64url').equals(key)).toBe(false);
  });

  it('go with every call as a bearer header, to the agent URL without its trailing slash', () => {
    const agent = agentEndpoint(agentTokensFrom(key), 'bs_one', 'http://127.0.0.1:4000/');
    expect(agent.url).toBe('http://127.0.0.1:4000');
    expect(agentHeaders(agent, { 'content-type': 'application/json', authorization: 'Bearer client' })).toEqual({ 'content-type': 'application/json', authorization: `Bearer ${agent.token}` });
    expect(agentWsUrl(agent, '/cdp')).toBe('ws://127.0.0.1:4000/cdp');
  });
});
