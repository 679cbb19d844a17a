import type Kernel from '@onkernel/sdk';
import { BadRequestError, NotFoundError } from '@onkernel/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPageServer, type TestPageServer } from '../support/test-page-server.js';
import { cleanupServices, startService, type RunningService } from '../support/service.js';

/** browsers.playwright.execute through the SDK against the built service, its agents and a real headless Chromium. */

let service: RunningService;
let admin: Kernel;
let pages: TestPageServer;

beforeAll(async () => {
  service = await startService();
  admin = service.client();
  pages = await startTestPageServer({ '/hello': '<title>Hello SDK</title><p id="x">from the page</p>' });
});
afterAll(async () => {
  await cleanupServices();
  await pages?.close();
});

describe('browsers.playwright.execute through the SDK', () => {
  it('returns the result, the console output and each kind of failure as the SDK types them', async () => {
    const session = await admin.browsers.create({ headless: true });
    try {
      const { playwright } = admin.browsers;
      const ok = await playwright.execute(session.session_id, {
        code: `await page.goto(${JSON.stringify(`${pages.url}/hello`)}); console.log('on', page.url()); return { title: await page.title(), text: await page.textContent('#x') };`,
      });
      expect(ok).toEqual({ success: true, result: { title: 'Hello SDK', text: 'from the page' }, stdout: `on ${pages.url}/hello\n`, stderr: '' });
      const thrown = await playwright.execute(session.session_id, { code: "throw new Error('nope')" });
      expect(thrown).toMatchObject({ success: false, error: 'nope' });
      expect(thrown.stderr).toContain('Error: nope');
      const syntax = await playwright.execute(session.session_id, { code: 'return )' });
      expect(syntax.success).toBe(false);
      expect(syntax.error).toMatch(/^SyntaxError: /);
      const slow = await playwright.execute(session.session_id, { code: 'await new Promise(() => {})', timeout_sec: 1 });
      expect(slow).toMatchObject({ success: false, error: 'Execution timed out after 1000ms' });
    } finally {
      await admin.browsers.deleteByID(session.session_id);
    }
  }, 120_000);

  it('refuses a bad body with 400 and an unknown browser with 404', async () => {
    const session = await admin.browsers.create({ headless: true });
    try {
      await expect(admin.browsers.playwright.execute(session.session_id, { code: '' })).rejects.toBeInstanceOf(BadRequestError);
      await expect(admin.browsers.playwright.execute(session.session_id, { code: 'return 1', timeout_sec: 10_000 })).rejects.toBeInstanceOf(BadRequestError);
      await expect(admin.browsers.playwright.execute('no-such-browser', { code: 'return 1' })).rejects.toBeInstanceOf(NotFoundError);
    } finally {
      await admin.browsers.deleteByID(session.session_id);
    }
  }, 60_000);
});
