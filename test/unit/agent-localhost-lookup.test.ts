import type dns from 'node:dns';
import { describe, expect, it } from 'vitest';
import { localhostAwareLookup } from '../../agent/src/proxy.js';

const lookup = (host: string, options: dns.LookupOptions) =>
  new Promise<unknown>((resolve, reject) => {
    localhostAwareLookup(host, options, (error: NodeJS.ErrnoException | null, address: unknown, family?: number) =>
      error ? reject(error) : resolve(options.all ? address : { address, family }),
    );
  });

describe('the forwarder’s resolver (RFC 6761: *.localhost is loopback)', () => {
  it('answers localhost names itself, in both callback shapes', async () => {
    expect(await lookup('app.localhost', {})).toEqual({ address: '127.0.0.1', family: 4 });
    expect(await lookup('A.B.Localhost.', {})).toEqual({ address: '127.0.0.1', family: 4 });
    expect(await lookup('localhost', { family: 6 })).toEqual({ address: '::1', family: 6 });
    expect(await lookup('x.localhost', { all: true })).toEqual([{ address: '127.0.0.1', family: 4 }]);
  });

  it('leaves other names to the system resolver', async () => {
    expect(await lookup('127.0.0.5', {})).toEqual({ address: '127.0.0.5', family: 4 });
    await expect(lookup('localhost.example.invalid', {})).rejects.toMatchObject({ code: expect.stringMatching(/ENOTFOUND|EAI_AGAIN/) });
  });
});
