import type Kernel from '@onkernel/sdk';
import { BadRequestError, NotFoundError } from '@onkernel/sdk';
import { chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPageServer, type TestPageServer } from '../support/test-page-server.js';
import { detailFields, rejection, unique } from './support/sdk.js';
import { cleanupServices, collect, startService, type RunningService } from '../support/service.js';

/** Browser sessions through the SDK and Playwright, against the built service with real Chromium. */

let service: RunningService;
let admin: Kernel;
let pages: TestPageServer;

beforeAll(async () => {
  service = await startService();
  admin = service.client();
  pages = await startTestPageServer({ '/hello': '<title>Hello from a session</title>' });
});
afterAll(async () => {
  await cleanupServices();
  await pages?.close();
});

describe('browsers through the SDK', () => {
  it('creates a session that Playwright drives over cdp_ws_url, then reads, renames, lists and deletes it', async () => {
    const name = unique('session');
    const created = await admin.browsers.create({ name, headless: true, tags: { team: 'e2e' }, timeout_seconds: 120 });
    expect(created).toMatchObject({ name, headless: true, stealth: false, timeout_seconds: 120, tags: { team: 'e2e' } });
    expect(created.cdp_ws_url).toMatch(/^ws:\/\/127\.0\.0\.1:\d+\/browsers\/.+\/cdp\?token=/);
    expect(created.base_url).toBeUndefined();

    const browser = await chromium.connectOverCDP(created.cdp_ws_url);
    try {
      const page = await (browser.contexts()[0] ?? (await browser.newContext())).newPage();
      await page.goto(`${pages.url}/hello`);
      expect(await page.title()).toBe('Hello from a session');
    } finally {
      await browser.close();
    }

    expect((await admin.browsers.retrieve(name)).session_id).toBe(created.session_id);
    const renamed = await admin.browsers.update(created.session_id, { name: `${name}-2` });
    expect(renamed.name).toBe(`${name}-2`);
    const listed = await collect(admin.browsers.list({ tags: { team: 'e2e' } }));
    expect(listed.map((b) => b.session_id)).toContain(created.session_id);

    await admin.browsers.deleteByID(created.session_id);
    await rejection(admin.browsers.retrieve(created.session_id), NotFoundError);
    const deleted = await admin.browsers.retrieve(created.session_id, { include_deleted: true });
    expect(deleted.deleted_at).toEqual(expect.any(String));
  });

  it('refuses bad input with BadRequestError naming each field, and unknown sessions with NotFoundError', async () => {
    const error = await rejection(
      admin.browsers.create({ timeout_seconds: 5, viewport: { width: 0, height: 10 } }),
      BadRequestError,
    );
    expect(detailFields(error)).toEqual(expect.arrayContaining(['body.timeout_seconds', 'body.viewport.width']));
    await rejection(admin.browsers.retrieve('bs_nope'), NotFoundError);
    await rejection(admin.browsers.deleteByID('bs_nope'), NotFoundError);
  });
});
