import { describe, expect, it } from 'vitest';
import { readChromiumMessage, rewriteForClient } from '../../agent/src/cdp/frames.js';

/** The routing shortcut of the agent's CDP multiplexer must agree with a full parse, whatever a page puts in a message. */
describe('readChromiumMessage / rewriteForClient', () => {
  const session = '0123456789ABCDEF0123456789ABCDEF';
  const samples: Record<string, unknown>[] = [
    { id: 7, result: {}, sessionId: session },
    { id: 7, result: { value: 'a "quoted" ,"sessionId":"X"} string' } },
    { method: 'Runtime.consoleAPICalled', params: { args: [{ value: `,"sessionId":"${session}"}` }] }, sessionId: session },
    { method: 'Target.attachedToTarget', params: { sessionId: 'CHILD', targetInfo: { url: 'https://x/?"sessionId"' } }, sessionId: session },
    { method: 'Target.detachedFromTarget', params: { sessionId: 'CHILD' } },
    { method: 'Page.loadEventFired', params: { timestamp: 1 } },
    { id: 9, error: { code: -32001, message: 'Session with given id not found.' } },
    { id: 3, result: { sessionId: 'NESTED' }, sessionId: session },
    { method: 'Network.dataReceived', params: { blob: 'é'.repeat(300) + '\\' }, sessionId: session },
  ];

  for (const sample of samples) {
    const text = JSON.stringify(sample);
    it(`reads ${text.slice(0, 60)}`, () => {
      const read = readChromiumMessage(text);
      expect(read.id).toBe(sample.id);
      expect(read.method).toBe(sample.method);
      expect(read.sessionId).toBe(sample.sessionId);
      const params = sample.params as { sessionId?: string } | undefined;
      const named = sample.method === 'Target.attachedToTarget' || sample.method === 'Target.detachedFromTarget' ? params?.sessionId : undefined;
      expect(read.namedSession).toBe(named);
      for (const clientId of [undefined, 1, 123456]) {
        for (const drop of [false, true]) {
          const expected: Record<string, unknown> = { ...sample };
          if (clientId !== undefined && sample.id !== undefined) expected.id = clientId;
          if (drop) delete expected.sessionId;
          const out = JSON.parse(rewriteForClient(text, read, sample.id === undefined ? undefined : clientId, drop));
          expect(out).toEqual(sample.id === undefined || clientId !== undefined ? expected : { ...expected, id: sample.id });
        }
      }
    });
  }

  it('takes the shortcut for Chromium-shaped messages (no parse), and parses anything else', () => {
    expect(readChromiumMessage(JSON.stringify(samples[0])).parsed).toBeUndefined();
    expect(readChromiumMessage(JSON.stringify(samples[2])).parsed).toBeUndefined();
    expect(readChromiumMessage(JSON.stringify({ sessionId: session, id: 1, result: {} })).parsed).toBeDefined();
  });
});
