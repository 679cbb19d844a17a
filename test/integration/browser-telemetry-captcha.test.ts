import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../api/src/clock.js';
import type { HttpClient } from '../support/http.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { startTestPageServer, type TestPageServer } from '../support/test-page-server.js';
import { newProject } from './browsers.fixtures.js';
import { eventuallyEvents, ofType, type Envelope } from './browser-telemetry.fixtures.js';

/**
 * The captcha observer (agent/src/telemetry/captcha-script.ts) in real Chromium through
 * real agents and real Postgres. The widgets are local copies of the DOM the vendors'
 * scripts render (containers, response fields, iframes of about:blank): no vendor script
 * is loaded and no page names a host beyond loopback. "Solving" is the page setting the
 * response field, which is exactly what the vendors' scripts do and what is observed.
 */

const WIDGETS = `<!doctype html><title>captcha</title><body>
<div id="area"></div>
<div class="grecaptcha-badge" style="width:256px;height:60px"><div class="grecaptcha-logo"><iframe title="reCAPTCHA" src="about:blank#size=invisible" width="256" height="60"></iframe></div><textarea name="g-recaptcha-response" style="display:none"></textarea></div>
<div class="some-captcha" style="width:300px;height:80px"><input name="captcha"></div>
<button id="marker" style="width:100px;height:30px">marker</button>
<script>
  const markup = {
    recaptcha: (id) => '<div class="g-recaptcha" id="' + id + '"><div style="width:304px;height:78px"><div><iframe title="reCAPTCHA" src="about:blank" width="304" height="78"></iframe></div><textarea name="g-recaptcha-response" class="g-recaptcha-response" style="display:none"></textarea></div></div>',
    hcaptcha: (id) => '<div class="h-captcha" id="' + id + '"><iframe src="about:blank" data-hcaptcha-widget-id="w" title="Widget containing checkbox for hCaptcha security challenge" style="width:303px;height:78px"></iframe><textarea name="g-recaptcha-response" style="display:none"></textarea><textarea name="h-captcha-response" style="display:none"></textarea></div>',
    turnstile: (id) => '<div id="' + id + '"><div style="width:300px;height:65px"><input type="hidden" name="cf-turnstile-response"></div></div>',
    geetest: (id) => '<div class="geetest_holder geetest_wind" id="' + id + '" style="width:300px;height:44px"><div class="geetest_btn"></div><div class="geetest_form"><input type="hidden" name="geetest_challenge"><input type="hidden" name="geetest_validate"><input type="hidden" name="geetest_seccode"></div></div>',
  };
  window.render = (provider, id) => document.getElementById('area').insertAdjacentHTML('beforeend', markup[provider](id));
  window.solve = (id, token) => { for (const field of document.getElementById(id).querySelectorAll('textarea, input[type=hidden]')) field.value = token; };
  window.drop = (id) => document.getElementById(id).remove();
</script>`;

const TOKEN = 'TOKEN-never-in-an-event';

let app: TestApp;
let pages: TestPageServer;
let client: HttpClient;

beforeAll(async () => {
  app = await startTestApp({ clock: systemClock });
  pages = await startTestPageServer({
    '/captcha': WIDGETS,
    '/outer': '<!doctype html><title>outer</title><iframe src="/framed" style="width:400px;height:200px"></iframe>',
    '/framed': '<!doctype html><title>framed</title><div class="h-captcha" id="h"><iframe src="about:blank" style="width:303px;height:78px"></iframe><textarea name="h-captcha-response" style="display:none"></textarea></div>',
  });
  ({ http: client } = await newProject(app.tenant.http));
}, 60_000);
afterAll(async () => {
  await app?.close();
  await pages?.close();
});

async function openSession(telemetry: Record<string, unknown>): Promise<{ id: string; browser: Browser; page: Page }> {
  const res = await client.post('/browsers', { headless: true, telemetry });
  expect(res.status, res.text).toBe(200);
  const browser = await chromium.connectOverCDP(res.body.cdp_ws_url);
  const context = browser.contexts()[0] ?? (await browser.newContext());
  return { id: res.body.session_id as string, browser, page: await context.newPage() };
}

const results = (events: Envelope[]) => ofType(events, 'captcha_challenge_result').map((e) => e.event.data as Record<string, unknown>);

describe('captcha challenge outcomes (captcha on by default)', () => {
  let session: Awaited<ReturnType<typeof openSession>>;
  let events: Envelope[];

  beforeAll(async () => {
    session = await openSession({ enabled: true });
    const { page } = session;
    await page.goto(`${pages.url}/plain`);
    await page.goto(`${pages.url}/captcha?q=query-secret`);
    // One widget of each provider, and a second hCaptcha that will be dismissed.
    await page.evaluate(`['recaptcha', 'hcaptcha', 'turnstile', 'geetest'].forEach((p) => window.render(p, p)); window.render('hcaptcha', 'h2')`);
    await page.evaluate(`['recaptcha', 'hcaptcha', 'turnstile', 'geetest'].forEach((p) => window.solve(p, '${TOKEN}'))`);
    await eventuallyEvents(client, session.id, (all) => expect(results(all).filter((r) => r.status === 'solved')).toHaveLength(4));
    // The solved widgets go away (no second event for them), and h2 without a token.
    await page.evaluate(`['recaptcha', 'hcaptcha', 'turnstile', 'geetest', 'h2'].forEach((id) => window.drop(id))`);
    await eventuallyEvents(client, session.id, (all) => expect(results(all).filter((r) => r.status === 'abandoned')).toHaveLength(1));
    // A Turnstile left open when the page goes away; a reCAPTCHA solved first marks that it was seen.
    await page.evaluate(`window.render('turnstile', 't2'); window.render('recaptcha', 'r2'); window.solve('r2', '${TOKEN}')`);
    await eventuallyEvents(client, session.id, (all) => expect(results(all).filter((r) => r.status === 'solved')).toHaveLength(5));
    await page.goto(`${pages.url}/after`);
    events = await eventuallyEvents(client, session.id, (all) => expect(results(all).filter((r) => r.status === 'abandoned')).toHaveLength(2));
  }, 90_000);
  afterAll(async () => {
    await session?.browser.close().catch(() => undefined);
    await client.delete(`/browsers/${session?.id}`);
  });

  it('reports each provider’s widget solved once its response field holds a token, in Kernel’s shape', () => {
    const solved = ofType(events, 'captcha_challenge_result').filter((e) => e.event.data?.status === 'solved');
    expect(solved.map((e) => String(e.event.data?.captcha_provider)).sort()).toEqual(['geetest', 'hcaptcha', 'recaptcha_v2', 'recaptcha_v2', 'turnstile']);
    for (const { event } of solved) {
      expect(event).toMatchObject({ category: 'captcha', source: { kind: 'cdp', event: 'Runtime.bindingCalled' } });
      expect(event.data).toMatchObject({ website_host: '127.0.0.1', website_path: '/captcha' });
      expect(event.data?.captcha_type).toBe(event.data?.captcha_provider);
      expect(event.data?.challenge_id).toMatch(/^[0-9a-f]{32}$/);
      expect(event.data?.duration_ms).toBeGreaterThanOrEqual(0);
    }
  });

  it('reports a widget removed without a token, and one left open when the page goes away, as abandoned', () => {
    const abandoned = results(events).filter((r) => r.status === 'abandoned');
    expect(abandoned.map((r) => r.captcha_provider)).toEqual(['hcaptcha', 'turnstile']);
  });

  it('reports one outcome per challenge, and nothing for an invisible badge, an unknown captcha or a page without one', () => {
    const all = results(events);
    expect(all).toHaveLength(7);
    expect(new Set(all.map((r) => r.challenge_id)).size).toBe(7);
    expect(all.every((r) => r.website_path === '/captcha')).toBe(true);
  });

  it('never carries the token or the page’s query', () => {
    const text = JSON.stringify(ofType(events, 'captcha_challenge_result'));
    expect(text).not.toContain(TOKEN);
    expect(text).not.toContain('query-secret');
  });

  it('leaves nothing the page can see in its own world', async () => {
    const globals = await session.page.evaluate<string[]>("Object.getOwnPropertyNames(window).filter((name) => name.startsWith('__bp'))");
    expect(globals).toEqual([]);
  });
});

describe('a widget in a same-origin frame', () => {
  it('is observed in the frame’s document, with the frame’s host and path', async () => {
    const { id, browser, page } = await openSession({ browser: { captcha: { enabled: true } } });
    try {
      await page.goto(`${pages.url}/outer`);
      const frame = page.frames().find((f) => f.url().endsWith('/framed'))!;
      await frame.evaluate(`document.querySelector('[name="h-captcha-response"]').value = '${TOKEN}'`);
      const events = await eventuallyEvents(client, id, (all) => expect(results(all)).toHaveLength(1));
      expect(results(events)[0]).toMatchObject({ status: 'solved', captcha_provider: 'hcaptcha', website_host: '127.0.0.1', website_path: '/framed' });
    } finally {
      await browser.close().catch(() => undefined);
      await client.delete(`/browsers/${id}`);
    }
  }, 60_000);
});

describe('captcha off', () => {
  it('reports no challenge when the category is off', async () => {
    const { id, browser, page } = await openSession({ enabled: true, browser: { captcha: { enabled: false }, interaction: { enabled: true } } });
    try {
      await page.goto(`${pages.url}/captcha`);
      await page.evaluate(`window.render('hcaptcha', 'h'); window.solve('h', '${TOKEN}'); window.render('turnstile', 't')`);
      await page.evaluate(`window.drop('t')`);
      // A real click after all that, seen by the same page script, marks that the page was watched.
      await page.click('#marker');
      const events = await eventuallyEvents(client, id, (all) => expect(ofType(all, 'interaction_click').length).toBeGreaterThan(0));
      expect(events.filter((e) => e.event.category === 'captcha')).toEqual([]);
    } finally {
      await browser.close().catch(() => undefined);
      await client.delete(`/browsers/${id}`);
    }
  }, 60_000);
});
