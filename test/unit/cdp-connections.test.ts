import { describe, expect, it } from 'vitest';
import { CdpConnections } from '../../api/src/modules/browsers/cdp-proxy.js';

// Found by the soak (bench/soak.ts): sessions ended by DELETE or by their pool kept their
// last-closed time for the life of the process, one entry per session ever connected to.
describe('CdpConnections', () => {
  const at = new Date('2026-01-01T00:00:00Z');

  it('forgets sessions that are no longer live once nothing of theirs is open', () => {
    const connections = new CdpConnections();
    for (const id of ['ended', 'live', 'ended-but-open']) {
      connections.opened(id);
      connections.closed(id, at);
    }
    connections.opened('ended-but-open');
    connections.retainOnly(new Set(['live']));
    expect(connections.lastClosedAt('ended')).toBeUndefined();
    expect(connections.lastClosedAt('live')).toEqual(at);
    // Still connected: its close is yet to come and the count must stay right.
    expect(connections.lastClosedAt('ended-but-open')).toEqual(at);
    expect(connections.count('ended-but-open')).toBe(1);
  });
});
