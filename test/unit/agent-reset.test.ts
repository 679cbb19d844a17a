import { describe, expect, it } from 'vitest';
import { ConnectionTracker } from '../../agent/src/connections.js';
import { MAX_START_URL_LENGTH, parseResetRequest, restorableCookies, webOrigins, type CdpCookie } from '../../agent/src/reset.js';

/** The pure parts of the agent's reset (agent/src/reset.ts) and the connection tracker it drives. */

describe('the POST /reset body', () => {
  it('takes no body, an empty object, about:blank or an http(s) start_url', async () => {
    expect(await parseResetRequest('')).toEqual({ ok: true, request: {} });
    expect(await parseResetRequest('{}')).toEqual({ ok: true, request: {} });
    expect(await parseResetRequest('{"start_url":"about:blank"}')).toEqual({ ok: true, request: { startUrl: 'about:blank' } });
    expect(await parseResetRequest('{"start_url":"https://example.test/a?b=1"}')).toEqual({ ok: true, request: { startUrl: 'https://example.test/a?b=1' } });
    expect(await parseResetRequest('{"start_url":"HTTP://Example.test"}')).toEqual({ ok: true, request: { startUrl: 'http://example.test/' } });
    const longest = `http://x.test/${'a'.repeat(MAX_START_URL_LENGTH - 'http://x.test/'.length)}`;
    expect(await parseResetRequest(JSON.stringify({ start_url: longest }))).toMatchObject({ ok: true });
  });

  it.each([
    ['not JSON', 'start_url: x', 'invalid_json', undefined],
    ['an array', '[]', 'invalid_type', undefined],
    ['null', 'null', 'invalid_type', undefined],
    ['an unknown field', '{"startUrl":"http://x.test/"}', 'unknown_field', 'body.startUrl'],
    ['a number', '{"start_url":5}', 'invalid_type', 'body.start_url'],
    ['null start_url', '{"start_url":null}', 'invalid_type', 'body.start_url'],
    ['not a URL', '{"start_url":"example.test"}', 'invalid_url', 'body.start_url'],
    ['a file: URL', '{"start_url":"file:///etc/passwd"}', 'invalid_url', 'body.start_url'],
    ['a javascript: URL', '{"start_url":"javascript:alert(1)"}', 'invalid_url', 'body.start_url'],
    ['about: other than blank', '{"start_url":"about:config"}', 'invalid_url', 'body.start_url'],
    ['a URL over 2048 characters', JSON.stringify({ start_url: `http://x.test/${'a'.repeat(MAX_START_URL_LENGTH)}` }), 'too_long', 'body.start_url'],
  ])('refuses %s', async (_what, text, code, field) => {
    const parsed = await parseResetRequest(text);
    expect(parsed.ok).toBe(false);
    if (parsed.ok) return;
    expect(parsed.error).toMatchObject({ code: 'invalid_request', message: expect.stringMatching(/^The reset request is invalid: /) });
    expect(parsed.error.details).toEqual([{ code, message: expect.any(String), ...(field ? { field } : {}) }]);
  });

  it('refuses a body too large to be a reset request', async () => {
    expect(await parseResetRequest(undefined)).toMatchObject({ ok: false, error: { details: [{ code: 'too_large' }] } });
  });
});

describe('the origins whose storage a reset clears', () => {
  it('are those of web pages, frames and workers, once each; other schemes hold nothing to clear', () => {
    const origins = webOrigins([
      { url: 'http://a.test:8080/page' },
      { url: 'http://a.test:8080/other' },
      { url: 'https://b.test/frame' },
      { url: 'blob:https://c.test/3f2a' },
      { url: 'about:blank' },
      { url: 'chrome://omnibox-popup.top-chrome/' },
      { url: 'data:text/html,hi' },
      { url: '' },
    ]);
    expect(origins).toEqual(['http://a.test:8080', 'https://b.test', 'https://c.test']);
  });
});

describe('the cookies a reset puts back', () => {
  const cookie = (extra: Partial<CdpCookie>): CdpCookie => ({
    name: 'n',
    value: 'v',
    domain: 'a.test',
    path: '/',
    expires: -1,
    httpOnly: false,
    secure: false,
    session: true,
    ...extra,
  });
  const now = Date.parse('2026-01-01T00:00:00Z');

  it('are the baseline as Storage.setCookies takes it: a session cookie has no expiry, a persistent one keeps its own', () => {
    const restored = restorableCookies(
      [
        cookie({ name: 'session', sameSite: 'Lax', priority: 'Medium', sourceScheme: 'NonSecure', sourcePort: 80 }),
        cookie({ name: 'persistent', session: false, expires: now / 1000 + 3600, secure: true, httpOnly: true, partitionKey: { topLevelSite: 'https://b.test', hasCrossSiteAncestor: false } }),
      ],
      now,
    );
    expect(restored).toEqual([
      { name: 'session', value: 'v', domain: 'a.test', path: '/', secure: false, httpOnly: false, sameSite: 'Lax', priority: 'Medium', sourceScheme: 'NonSecure', sourcePort: 80 },
      {
        name: 'persistent',
        value: 'v',
        domain: 'a.test',
        path: '/',
        secure: true,
        httpOnly: true,
        expires: now / 1000 + 3600,
        partitionKey: { topLevelSite: 'https://b.test', hasCrossSiteAncestor: false },
      },
    ]);
  });

  it('leave out cookies that expired since the start and those with an opaque partition key', () => {
    const restored = restorableCookies([cookie({ session: false, expires: now / 1000 - 1 }), cookie({ partitionKeyOpaque: true })], now);
    expect(restored).toEqual([]);
  });
});

describe('the connection tracker during a reset', () => {
  it('closes every open connection and counts them; each leaves the count when it reports itself closed', () => {
    const tracker = new ConnectionTracker();
    const closed: string[] = [];
    const releases: Record<string, () => void> = {};
    for (const [name, kind] of [['cdp', 'cdp'], ['bidi', 'webdriver'], ['vnc', 'live_view']] as const) {
      releases[name] = tracker.opened(kind, () => {
        closed.push(name);
        releases[name]!();
      });
    }
    expect(tracker.activity()).toMatchObject({ connections: 3, idleSince: null });
    expect(tracker.closeAll()).toBe(3);
    expect(closed.sort()).toEqual(['bidi', 'cdp', 'vnc']);
    expect(tracker.activity()).toMatchObject({ connections: 0, byKind: { cdp: 0, webdriver: 0, live_view: 0 }, idleSince: expect.any(Date) });
    expect(tracker.closeAll()).toBe(0);
  });

  it('refuses new connections while held, and closes one that completes its upgrade meanwhile, after its caller wired it', async () => {
    const tracker = new ConnectionTracker();
    const resume = tracker.holdNewConnections();
    expect(tracker.accepting()).toBe(false);
    let closedLate = false;
    const release = tracker.opened('cdp', () => {
      closedLate = true;
      release();
    });
    // Not synchronously: the caller is still wiring the connection when opened() returns.
    expect(closedLate).toBe(false);
    await Promise.resolve();
    expect(closedLate).toBe(true);
    expect(tracker.total()).toBe(0);
    resume();
    resume();
    expect(tracker.accepting()).toBe(true);
    const stays = tracker.opened('cdp', () => undefined);
    await Promise.resolve();
    expect(tracker.total()).toBe(1);
    stays();
  });

  it('lets new connections wait until what must come first is done, whether it succeeded or not', async () => {
    const tracker = new ConnectionTracker();
    await tracker.admitted();
    let finish!: () => void;
    let fail!: (error: Error) => void;
    tracker.admitAfter(new Promise<void>((resolve) => (finish = resolve)));
    let admitted = false;
    void tracker.admitted().then(() => (admitted = true));
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(admitted).toBe(false);
    finish();
    await tracker.admitted();
    expect(admitted).toBe(true);
    tracker.admitAfter(new Promise<void>((_, reject) => (fail = reject)));
    fail(new Error('cookies could not be read'));
    await expect(tracker.admitted()).resolves.toBeUndefined();
  });
});
