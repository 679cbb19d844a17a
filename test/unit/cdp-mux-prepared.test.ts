import { PassThrough } from 'node:stream';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { CdpMux } from '../../agent/src/cdp/mux.js';
import { CdpPipe } from '../../agent/src/cdp/pipe.js';

/**
 * The browser session attached ahead of the first client (CdpMux.prepareConnection): the
 * client's connection takes it without a round trip to Chromium, and it behaves as one
 * attached on the spot. Chromium is played by the test over a real CdpPipe.
 */

interface Sent {
  id: number;
  method: string;
  sessionId?: string;
}

function fakeChromium() {
  const toChromium = new PassThrough();
  const fromChromium = new PassThrough();
  const sent: Sent[] = [];
  const waiters: (() => void)[] = [];
  let buffered = '';
  toChromium.on('data', (chunk: Buffer) => {
    buffered += chunk.toString('utf8');
    for (let end = buffered.indexOf('\0'); end >= 0; end = buffered.indexOf('\0')) {
      sent.push(JSON.parse(buffered.slice(0, end)) as Sent);
      buffered = buffered.slice(end + 1);
      for (const wake of waiters.splice(0)) wake();
    }
  });
  const mux = new CdpMux(new CdpPipe(toChromium, fromChromium), pino({ level: 'silent' }));
  return {
    mux,
    sent,
    /** The nth message the agent sent Chromium (0-based), once it has. */
    async nth(index: number): Promise<Sent> {
      while (sent.length <= index) await new Promise<void>((resolve) => waiters.push(resolve));
      return sent[index]!;
    },
    answer(message: Record<string, unknown>): void {
      fromChromium.write(`${JSON.stringify(message)}\0`);
    },
  };
}

describe('a CDP connection prepared ahead (CdpMux.prepareConnection)', () => {
  it('is taken by the first client without asking Chromium again, and another is prepared for the next', async () => {
    const chromium = fakeChromium();
    chromium.mux.prepareConnection();
    const attach = await chromium.nth(0);
    expect(attach.method).toBe('Target.attachToBrowserTarget');
    chromium.answer({ id: attach.id, result: { sessionId: 'PREPARED' } });
    await new Promise((resolve) => setImmediate(resolve));

    const connection = await chromium.mux.connect();
    const received: string[] = [];
    connection.setOnMessage((text) => received.push(text));
    // The client's first command goes on the prepared session; the next attach is the spare's.
    const refill = await chromium.nth(1);
    expect(refill.method).toBe('Target.attachToBrowserTarget');
    connection.send(JSON.stringify({ id: 7, method: 'Browser.getVersion' }));
    const command = await chromium.nth(2);
    expect(command).toMatchObject({ method: 'Browser.getVersion', sessionId: 'PREPARED' });
    chromium.answer({ id: command.id, result: { product: 'Chrome/1' }, sessionId: 'PREPARED' });
    await new Promise((resolve) => setImmediate(resolve));
    expect(received.map((text) => JSON.parse(text) as unknown)).toEqual([{ id: 7, result: { product: 'Chrome/1' } }]);
    expect(chromium.mux.size()).toBe(1);
  });

  it('is not handed out once Chromium detached it: the client gets a session of its own', async () => {
    const chromium = fakeChromium();
    chromium.mux.prepareConnection();
    const attach = await chromium.nth(0);
    chromium.answer({ id: attach.id, result: { sessionId: 'GONE' } });
    chromium.answer({ method: 'Target.detachedFromTarget', params: { sessionId: 'GONE' } });
    await new Promise((resolve) => setImmediate(resolve));

    const connecting = chromium.mux.connect();
    const own = await chromium.nth(1);
    expect(own.method).toBe('Target.attachToBrowserTarget');
    chromium.answer({ id: own.id, result: { sessionId: 'OWN' } });
    const connection = await connecting;
    connection.send(JSON.stringify({ id: 1, method: 'Browser.getVersion' }));
    expect(await chromium.nth(2)).toMatchObject({ method: 'Browser.getVersion', sessionId: 'OWN' });
  });
});
