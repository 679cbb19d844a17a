import { execFile } from 'node:child_process';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { promisify } from 'node:util';
import { chromium, type Browser, type Frame } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../api/src/clock.js';
import type { HttpClient } from '../support/http.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { newProject } from './browsers.fixtures.js';

/**
 * stealth through the real local runtime: a local probe page reports what detection
 * scripts look at, in the top page, a cross-site iframe, a script-made about:blank iframe
 * and a new tab, and the server records the HTTP headers the browser sent.
 */

/** Runs in the page; every signal a detection script commonly reads. */
const PROBE = String.raw`
window.__probe = (async () => {
  const gl = document.createElement('canvas').getContext('webgl');
  const debug = gl && gl.getExtension('WEBGL_debug_renderer_info');
  const blank = document.createElement('iframe');
  document.documentElement.appendChild(blank);
  const blankGl = blank.contentWindow.document.createElement('canvas').getContext('webgl');
  return {
    userAgent: navigator.userAgent,
    webdriver: navigator.webdriver,
    brands: navigator.userAgentData ? navigator.userAgentData.brands.map((b) => b.brand + '/' + b.version) : null,
    plugins: Array.from(navigator.plugins, (p) => p.name),
    mimeTypes: Array.from(navigator.mimeTypes, (m) => m.type),
    languages: navigator.languages,
    webgl: debug ? [gl.getParameter(debug.UNMASKED_VENDOR_WEBGL), gl.getParameter(debug.UNMASKED_RENDERER_WEBGL)] : null,
    blankFrameWebgl: blankGl ? blankGl.getParameter(0x9246) : null,
    blankFrameWebdriver: blank.contentWindow.navigator.webdriver,
    nativeLooking: Function.prototype.toString.call(WebGLRenderingContext.prototype.getParameter),
    chrome: typeof window.chrome === 'object' && window.chrome !== null,
    notification: typeof Notification === 'undefined' ? 'missing' : Notification.permission,
    notificationQuery: (await navigator.permissions.query({ name: 'notifications' })).state,
  };
})();
`;

interface Signals {
  userAgent: string;
  webdriver: boolean;
  brands: string[] | null;
  plugins: string[];
  mimeTypes: string[];
  languages: string[];
  webgl: [string, string] | null;
  blankFrameWebgl: string | null;
  blankFrameWebdriver: boolean;
  nativeLooking: string;
  chrome: boolean;
  notification: string;
  notificationQuery: string;
}

interface ProbeSite {
  url: string;
  /** Headers of every request, by path. */
  headers: Map<string, IncomingHttpHeaders>;
}

let app: TestApp;
let http: HttpClient;
let majorVersion: number;
const servers: Server[] = [];
let top: ProbeSite;
let other: ProbeSite;

async function probeSite(host: string, frameUrl: () => string): Promise<ProbeSite> {
  const headers = new Map<string, IncomingHttpHeaders>();
  const server = createServer((req, res) => {
    const path = new URL(req.url ?? '/', 'http://x').pathname;
    headers.set(path, req.headers);
    res.writeHead(200, { 'content-type': 'text/html', 'cache-control': 'no-store' });
    const frame = path === '/top' ? `<iframe src="${frameUrl()}"></iframe>` : '';
    res.end(`<!doctype html><html><head><script>${PROBE}</script></head><body>${frame}</body></html>`);
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  return { url: `http://${host}:${(server.address() as AddressInfo).port}`, headers };
}

beforeAll(async () => {
  app = await startTestApp({ clock: systemClock });
  ({ http } = await newProject(app.tenant.http));
  const { stdout } = await promisify(execFile)('/usr/lib/chromium/chromium', ['--version']);
  majorVersion = Number(/(\d+)\.\d+\.\d+\.\d+/.exec(stdout)![1]);
  // Distinct loopback addresses are distinct sites: the iframe is cross-site (out of process).
  other = await probeSite('127.0.0.8', () => '');
  top = await probeSite('127.0.0.7', () => `${other.url}/frame`);
});
afterAll(async () => {
  await app?.close();
  for (const server of servers) server.closeAllConnections();
  await Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))));
});

const probe = (frame: Frame): Promise<Signals> => frame.evaluate<Signals>('window.__probe');

/** Every failed check by name; empty when the browser passes as a normal Chrome. */
function detections(signals: Signals, headers: IncomingHttpHeaders | undefined): string[] {
  const failed: string[] = [];
  const check = (name: string, ok: boolean) => ok || failed.push(name);
  check('webdriver', signals.webdriver === false && signals.blankFrameWebdriver === false);
  check('ua-headless', !/Headless/i.test(signals.userAgent));
  check('ua-version', signals.userAgent.includes(`Chrome/${majorVersion}.0.0.0`));
  check('header-ua', headers?.['user-agent'] === signals.userAgent);
  check('brands', Array.isArray(signals.brands) && signals.brands.includes(`Chromium/${majorVersion}`) && !signals.brands.some((b) => /Headless/i.test(b)));
  check('header-client-hints', typeof headers?.['sec-ch-ua'] === 'string' && !/Headless/i.test(headers['sec-ch-ua']) && headers['sec-ch-ua'].includes(`"Chromium";v="${majorVersion}"`));
  check('plugins', signals.plugins.includes('PDF Viewer') && signals.plugins.includes('Chrome PDF Viewer') && signals.mimeTypes.includes('application/pdf'));
  const accepted = String(headers?.['accept-language'] ?? '').split(',').map((part) => part.split(';')[0]!.trim());
  check('languages', signals.languages.length > 0 && JSON.stringify(signals.languages) === JSON.stringify(accepted));
  const gpu = (text: unknown) => typeof text === 'string' && text !== '' && !/SwiftShader|Google Inc\. \(Google\)|llvmpipe/i.test(text);
  check('webgl', Array.isArray(signals.webgl) && gpu(signals.webgl[0]) && gpu(signals.webgl[1]) && gpu(signals.blankFrameWebgl));
  check('native-functions', signals.nativeLooking === 'function getParameter() { [native code] }');
  check('window-chrome', signals.chrome === true);
  check('notification-permission', (signals.notification === 'default' ? 'prompt' : signals.notification) === signals.notificationQuery);
  return failed;
}

async function probeSession(body: Record<string, unknown>): Promise<{ top: string[]; iframe: string[]; tab: string[]; signals: Signals }> {
  const res = await http.post('/browsers', body);
  expect(res.status, res.text).toBe(200);
  expect(res.body.stealth).toBe(body.stealth ?? false);
  let browser: Browser | undefined;
  try {
    browser = await chromium.connectOverCDP(res.body.cdp_ws_url);
    const context = browser.contexts()[0]!;
    const page = await context.newPage();
    await page.goto(`${top.url}/top`);
    const frame = page.frames().find((f) => f.url().startsWith(other.url));
    expect(frame, 'the cross-site iframe loaded').toBeDefined();
    const signals = await probe(page.mainFrame());
    const iframe = detections(await probe(frame!), other.headers.get('/frame'));
    // A tab the page opens itself, as a site would.
    const [tab] = await Promise.all([context.waitForEvent('page'), page.evaluate(`window.open('${top.url}/tab')`)]);
    await tab.waitForLoadState();
    const tabFailures = detections(await probe(tab.mainFrame()), top.headers.get('/tab'));
    return { top: detections(signals, top.headers.get('/top')), iframe, tab: tabFailures, signals };
  } finally {
    await browser?.close().catch(() => undefined);
    await http.delete(`/browsers/${res.body.session_id}`);
  }
}

describe('stealth', () => {
  it('passes every probe in a headless session: top page, cross-site iframe, about:blank iframe and a new tab', async () => {
    const result = await probeSession({ headless: true, stealth: true });
    expect(result).toMatchObject({ top: [], iframe: [], tab: [] });
  }, 90_000);

  it('passes every probe in a headful session', async () => {
    const result = await probeSession({ headless: false, stealth: true });
    expect(result).toMatchObject({ top: [], iframe: [], tab: [] });
  }, 90_000);

  it('the same probe catches a headless session without stealth', async () => {
    const result = await probeSession({ headless: true });
    expect(result.signals.userAgent).toContain('HeadlessChrome');
    expect(result.signals.webdriver).toBe(true);
    expect(result.top).toEqual(expect.arrayContaining(['webdriver', 'ua-headless', 'webgl']));
    expect(result.tab).toEqual(expect.arrayContaining(['webdriver', 'ua-headless']));
  }, 90_000);
});
