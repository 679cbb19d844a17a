import { createServer, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FixedClock } from '../../api/src/clock.js';
import { deadPort, startCheckServer, startForwardProxy, type CheckServer, type ForwardProxy } from '../support/forward-proxy.js';
import { CapturedLog } from '../support/captured-log.js';
import { startTestApp, type TestApp } from '../support/test-app.js';

const USER = 'alice';
const PASSWORD = 'pw-Through-Proxy-91b3';
const TIMEOUT_MS = 1500;

describe('proxy check through a real forward proxy', () => {
  const log = new CapturedLog();
  const clock = new FixedClock(new Date('2026-03-01T12:00:00Z'));
  let app: TestApp;
  let check: CheckServer;
  let open: ForwardProxy;
  let authed: ForwardProxy;
  let silent: Server;
  const silentSockets = new Set<Socket>();

  beforeAll(async () => {
    check = await startCheckServer('127.0.0.2');
    open = await startForwardProxy({ egress: '127.0.0.3' });
    authed = await startForwardProxy({ egress: '127.0.0.4', auth: { username: USER, password: PASSWORD } });
    // Accepts connections and never answers: only the timeout ends a check through it.
    silent = createServer((socket) => silentSockets.add(socket));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    app = await startTestApp({
      clock,
      log: log.logger(),
      proxy: {
        checkUrl: check.url,
        checkTimeoutMs: TIMEOUT_MS,
        allowPrivateCheckUrls: true,
        upstreams: [
          { name: 'open', types: ['datacenter'], url: `http://127.0.0.1:${open.port}` },
          { name: 'authed', types: ['isp'], url: `http://${USER}:${encodeURIComponent(PASSWORD)}@127.0.0.1:${authed.port}` },
          { name: 'spare', types: ['mobile'], url: `http://127.0.0.1:${open.port}` },
        ],
      },
    });
  });
  afterAll(async () => {
    await app?.close();
    for (const s of silentSockets) s.destroy();
    await new Promise((resolve) => silent?.close(resolve));
    await Promise.all([check?.close(), open?.close(), authed?.close()]);
  });

  const http = () => app.tenant.http;
  const custom = async (config: Record<string, unknown>) =>
    (await http().post('/proxies', { type: 'custom', config: { host: '127.0.0.1', ...config } })).body as { id: string };
  const runCheck = (id: string, body: unknown = {}) => http().post(`/proxies/${id}/check`, body);

  it('reaches the check URL through an open proxy and records available, the egress IP and the time', async () => {
    const p = await custom({ port: open.port });
    const hits = check.hits;
    const forwarded = open.forwarded;
    const res = await runCheck(p.id);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ id: p.id, status: 'available', ip_address: '127.0.0.3', last_checked: '2026-03-01T12:00:00.000Z' });
    expect(check.hits).toBe(hits + 1);
    expect(open.forwarded).toBe(forwarded + 1);
    expect((await http().get(`/proxies/${p.id}`)).body).toEqual(res.body);
  });

  it('sends the sealed password to a proxy that requires it', async () => {
    const p = await custom({ port: authed.port, username: USER, password: PASSWORD });
    const seen = authed.credentialsSeen.length;
    const res = await runCheck(p.id);
    expect(res.body).toMatchObject({ status: 'available', ip_address: '127.0.0.4' });
    expect(authed.credentialsSeen.slice(seen)).toEqual([`${USER}:${PASSWORD}`]);
    expect(res.text).not.toContain(PASSWORD);
  });

  it('is unavailable when the proxy refuses the password, or gets none', async () => {
    const wrong = await custom({ port: authed.port, username: USER, password: 'not-the-password' });
    const none = await custom({ port: authed.port });
    const refusals = authed.refusals;
    const hits = check.hits;
    for (const p of [wrong, none]) {
      const res = await runCheck(p.id);
      expect(res.status).toBe(200);
      expect(res.body.status).toBe('unavailable');
      expect(res.body.ip_address).toBeUndefined();
      expect(res.body.last_checked).toBe('2026-03-01T12:00:00.000Z');
    }
    expect(authed.refusals).toBe(refusals + 2);
    expect(check.hits).toBe(hits);
  });

  it('is unavailable when nothing listens on the proxy port', async () => {
    const p = await custom({ port: await deadPort() });
    const res = await runCheck(p.id);
    expect(res.body).toMatchObject({ status: 'unavailable' });
    expect((await http().get(`/proxies/${p.id}`)).body.status).toBe('unavailable');
  });

  it('gives up on a proxy that never answers after the check timeout', async () => {
    const p = await custom({ port: (silent.address() as { port: number }).port });
    const started = Date.now();
    const res = await runCheck(p.id);
    const took = Date.now() - started;
    expect(res.body.status).toBe('unavailable');
    expect(took).toBeGreaterThanOrEqual(TIMEOUT_MS - 100);
    expect(took).toBeLessThan(TIMEOUT_MS + 3000);
  });

  it('turns unavailable and drops the IP when a proxy that worked goes away', async () => {
    const gone = await startForwardProxy({ egress: '127.0.0.5' });
    const p = await custom({ port: gone.port });
    expect((await runCheck(p.id)).body).toMatchObject({ status: 'available', ip_address: '127.0.0.5' });
    await gone.close();
    clock.advance(60_000);
    const res = await runCheck(p.id);
    expect(res.body.status).toBe('unavailable');
    expect(res.body.ip_address).toBeUndefined();
    expect(res.body.last_checked).toBe(clock.now().toISOString());
  });

  it('checks a managed proxy through its upstream, credentials from the upstream URL included', async () => {
    const dc = (await http().post('/proxies', { type: 'datacenter' })).body;
    const isp = (await http().post('/proxies', { type: 'isp' })).body;
    const seen = authed.credentialsSeen.length;
    expect((await runCheck(dc.id)).body).toMatchObject({ status: 'available', ip_address: '127.0.0.3' });
    expect((await runCheck(isp.id)).body).toMatchObject({ status: 'available', ip_address: '127.0.0.4' });
    expect(authed.credentialsSeen.slice(seen)).toEqual([`${USER}:${PASSWORD}`]);
  });

  it('is unavailable once the bound upstream is no longer configured', async () => {
    const mobile = (await http().post('/proxies', { type: 'mobile' })).body;
    expect((await runCheck(mobile.id)).body.status).toBe('available');
    const upstreams = app.deps.proxy.upstreams;
    const index = upstreams.findIndex((u) => u.name === 'spare');
    const [spare] = upstreams.splice(index, 1);
    try {
      expect((await runCheck(mobile.id)).body).toMatchObject({ status: 'unavailable' });
      expect((await http().post('/proxies', { type: 'mobile' })).body.code).toBe('no_matching_upstream');
    } finally {
      upstreams.splice(index, 0, spare!);
    }
  });

  it('reports reachability of a given url without changing the stored health', async () => {
    const p = await custom({ port: open.port });
    const stored = (await runCheck(p.id)).body;
    clock.advance(1000);
    const reachable = await runCheck(p.id, { url: `${check.url}?probe=1` });
    expect(reachable.body).toMatchObject({ status: 'available', last_checked: clock.now().toISOString() });
    const unreachable = await runCheck(p.id, { url: `http://127.0.0.2:${await deadPort('127.0.0.2')}/` });
    expect(unreachable.status).toBe(200);
    expect(unreachable.body.status).toBe('unavailable');
    expect((await http().get(`/proxies/${p.id}`)).body).toEqual(stored);
  });

  it('never writes a proxy password to the log', () => {
    const all = log.text();
    expect(all).toContain('proxy check');
    expect(all).not.toContain(PASSWORD);
    expect(all).not.toContain(encodeURIComponent(PASSWORD));
    expect(all).not.toContain(Buffer.from(`${USER}:${PASSWORD}`).toString('base64'));
  });
});
