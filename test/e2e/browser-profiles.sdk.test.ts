import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type Kernel from '@onkernel/sdk';
import { ConflictError } from '@onkernel/sdk';
import { decompress } from 'fzstd';
import { chromium } from 'playwright-core';
import { Parser, type ReadEntry } from 'tar';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rejection, unique } from './support/sdk.js';
import { cleanupServices, startService, type RunningService } from '../support/service.js';

/**
 * Profiles end to end: the built service, the SDK, Playwright over cdp_ws_url and real
 * Chromium. State written by a writer session comes back in a later session.
 */

let service: RunningService;
let admin: Kernel;
let pageServer: http.Server;
let pageUrl: string;

beforeAll(async () => {
  service = await startService();
  admin = service.client();
  pageServer = http.createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/html', 'cache-control': 'no-store' });
    res.end('<!doctype html><title>profile e2e</title>');
  });
  // A loopback host of its own, so the cookie and the storage are this test's alone.
  await new Promise<void>((resolve) => pageServer.listen(0, '127.0.0.25', resolve));
  pageUrl = `http://127.0.0.25:${(pageServer.address() as AddressInfo).port}/`;
});
afterAll(async () => {
  await cleanupServices();
  pageServer?.closeAllConnections();
  await new Promise((resolve) => pageServer?.close(resolve));
});

/** Reads the page's cookie and localStorage in the session's browser, then writes `write` when given. */
async function visit(cdpWsUrl: string, write?: string): Promise<{ cookie: string; stored: string | null }> {
  const browser = await chromium.connectOverCDP(cdpWsUrl, { timeout: 30_000 });
  try {
    const page = await (browser.contexts()[0] ?? (await browser.newContext())).newPage();
    await page.goto(pageUrl);
    const state = await page.evaluate<{ cookie: string; stored: string | null }>("({ cookie: document.cookie, stored: localStorage.getItem('who') })");
    if (write !== undefined) {
      const value = JSON.stringify(write);
      await page.evaluate(`document.cookie = 'who=' + ${value} + '; max-age=86400; path=/'; localStorage.setItem('who', ${value});`);
    }
    await page.close();
    return state;
  } finally {
    await browser.close().catch(() => undefined);
  }
}

async function tarPaths(bytes: Buffer): Promise<string[]> {
  const paths: string[] = [];
  const parser = new Parser({ strict: true });
  parser.on('entry', (entry: ReadEntry) => {
    paths.push(entry.path);
    entry.resume();
  });
  await new Promise<void>((resolve, reject) => {
    parser.on('end', resolve);
    parser.on('error', reject);
    parser.end(bytes);
  });
  return paths;
}

describe('browser profiles through the SDK', () => {
  it('saves a writer’s cookie and localStorage at delete and loads them into later sessions; readers do not save', async () => {
    const name = unique('e2e-profile');
    const profile = await admin.profiles.create({ name });

    const writer = await admin.browsers.create({ headless: true, profile: { name, save_changes: true } });
    expect(writer.profile).toMatchObject({ id: profile.id, name, last_used_at: expect.any(String) });
    await rejection(admin.browsers.create({ headless: true, profile: { id: profile.id, save_changes: true } }), ConflictError);
    expect(await visit(writer.cdp_ws_url, 'writer')).toEqual({ cookie: '', stored: null });
    await admin.browsers.deleteByID(writer.session_id);

    const saved = await admin.profiles.retrieve(profile.id);
    expect(Date.parse(saved.updated_at!)).toBeGreaterThan(Date.parse(profile.updated_at!));
    expect(saved.last_used_at).toEqual(writer.profile!.last_used_at);
    const archive = Buffer.from(decompress(new Uint8Array(await (await admin.profiles.download(profile.id)).arrayBuffer())));
    const paths = await tarPaths(archive);
    expect(paths).toContain('Default/Cookies');
    expect(paths.some((p) => p.startsWith('Default/Local Storage/leveldb/'))).toBe(true);

    const reader = await admin.browsers.create({ headless: true, profile: { name } });
    expect(await visit(reader.cdp_ws_url, 'reader')).toEqual({ cookie: 'who=writer', stored: 'writer' });
    await admin.browsers.deleteByID(reader.session_id);
    expect((await admin.profiles.retrieve(profile.id)).updated_at).toBe(saved.updated_at);

    const again = await admin.browsers.create({ headless: true, profile: { id: profile.id } });
    expect(await visit(again.cdp_ws_url)).toEqual({ cookie: 'who=writer', stored: 'writer' });
    await admin.browsers.deleteByID(again.session_id);
  }, 180_000);

  it('attaches an empty profile to a running session with browsers.update and saves into it at delete', async () => {
    const name = unique('e2e-late');
    const profile = await admin.profiles.create({ name });
    const session = await admin.browsers.create({ headless: true });
    const updated = await admin.browsers.update(session.session_id, { profile: { name, save_changes: true } });
    expect(updated.profile?.id).toBe(profile.id);
    await visit(session.cdp_ws_url, 'late');
    await admin.browsers.deleteByID(session.session_id);

    const later = await admin.browsers.create({ headless: true, profile: { name } });
    expect(await visit(later.cdp_ws_url)).toEqual({ cookie: 'who=late', stored: 'late' });
    await admin.browsers.deleteByID(later.session_id);

    // It holds data now, which a running browser cannot load: only a new session can.
    const other = await admin.browsers.create({ headless: true });
    const refused = await rejection(admin.browsers.update(other.session_id, { profile: { name } }), ConflictError);
    expect((refused.error as { code?: string }).code).toBe('profile_not_loadable');
    await admin.browsers.deleteByID(other.session_id);
  }, 180_000);

  it('saves the profile of a writer that is still running when the service stops cleanly', async () => {
    const first = await startService();
    const client = first.client();
    const name = unique('e2e-stop');
    const profile = await client.profiles.create({ name });
    const writer = await client.browsers.create({ headless: true, timeout_seconds: 600, profile: { name, save_changes: true } });
    await visit(writer.cdp_ws_url, 'before-stop');
    expect(await first.stop('SIGTERM')).toEqual({ code: 0, signal: null });

    const second = await startService({ dataDir: first.dataDir });
    const again = second.client();
    expect(Date.parse((await again.profiles.retrieve(profile.id)).updated_at!)).toBeGreaterThan(Date.parse(profile.updated_at!));
    const reader = await again.browsers.create({ headless: true, profile: { name } });
    expect(await visit(reader.cdp_ws_url)).toEqual({ cookie: 'who=before-stop', stored: 'before-stop' });
    await again.browsers.deleteByID(reader.session_id);
  }, 180_000);
});
