import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadProxyUpstreams, pickUpstream, upstreamKey, type ProxyUpstream } from '../../api/src/modules/proxies/upstreams.js';

describe('proxy upstream configuration', () => {
  it('reads nothing when neither variable is set, and the inline JSON or the file otherwise', async () => {
    expect(await loadProxyUpstreams(undefined, undefined)).toEqual([]);
    const one = [{ name: 'a', types: ['datacenter'], url: 'http://127.0.0.1:3128' }];
    expect(await loadProxyUpstreams(JSON.stringify(one), undefined)).toEqual(one);
    const dir = await mkdtemp(path.join(os.tmpdir(), 'upstreams-'));
    try {
      await writeFile(path.join(dir, 'u.json'), JSON.stringify(one));
      expect(await loadProxyUpstreams(undefined, path.join(dir, 'u.json'))).toEqual(one);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('reports broken JSON by position without quoting it, since it may hold credentials', async () => {
    const error = await loadProxyUpstreams('[{"url":"http://u:TOPSECRET@h:1"', undefined).catch((e: Error) => e);
    expect(error).toBeInstanceOf(Error);
    expect((error as Error).message).toMatch(/not valid JSON \(at position \d+\)/);
    expect((error as Error).message).not.toContain('TOPSECRET');
  });

  it('refuses invalid upstreams and two upstreams with the same handle', async () => {
    await expect(loadProxyUpstreams('[{"types":["custom"],"url":"http://h:1"}]', undefined)).rejects.toThrow(/types/);
    await expect(loadProxyUpstreams('[{"types":["isp"],"url":"socks5://h:1"}]', undefined)).rejects.toThrow(/url/);
    const twins = [
      { types: ['isp'], url: 'http://a:1@h:1' },
      { types: ['mobile'], url: 'http://b:2@h:1' },
    ];
    await expect(loadProxyUpstreams(JSON.stringify(twins), undefined)).rejects.toThrow(/"http:\/\/h:1".*distinct names/);
  });

  it('matches type, protocol, country and other fields, first upstream first', () => {
    const upstreams: ProxyUpstream[] = [
      { name: 'us', types: ['residential'], countries: ['US'], match: { state: ['CA', 'NY'] }, url: 'http://h:1' },
      { name: 'any-resi', types: ['residential'], url: 'https://h:2' },
      { types: ['mobile'], countries: ['DE'], url: 'http://u:p@h:3' },
    ];
    const pick = (r: Parameters<typeof pickUpstream>[1]) => pickUpstream(upstreams, r)?.name ?? null;
    expect(pick({ type: 'residential', config: { country: 'US', state: 'ny' } })).toBe('us');
    expect(pick({ type: 'residential', config: { country: 'US', state: 'TX' } })).toBe('any-resi');
    expect(pick({ type: 'residential', protocol: 'http', config: { country: 'FR' } })).toBeNull();
    expect(pick({ type: 'residential', protocol: 'https', config: { country: 'US' } })).toBe('any-resi');
    expect(pick({ type: 'datacenter', config: {} })).toBeNull();
    expect(pickUpstream(upstreams, { type: 'mobile', config: { country: 'DE' } })).toBe(upstreams[2]);
    expect(pickUpstream(upstreams, { type: 'mobile', config: { country: 'AT' } })).toBeUndefined();
    expect(upstreamKey(upstreams[2]!)).toBe('http://h:3');
  });
});
