import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { chromium } from 'playwright-core';

/**
 * An http page for the test MV3 extension's content script (which marks every page with
 * data-ext on <html>; content scripts do not run on data: or about:blank), and how a test
 * reads the mark in a browser through CDP.
 */
export interface MarkerPage {
  url: string;
  close(): Promise<void>;
}

export async function startMarkerPage(host: string, title: string): Promise<MarkerPage> {
  const server = http.createServer((_req, res) => res.writeHead(200, { 'content-type': 'text/html' }).end(`<!doctype html><title>${title}</title>`));
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  return {
    url: `http://${host}:${(server.address() as AddressInfo).port}/`,
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/** The mark the extension put on the page in a new tab of the browser, or null when none came within 5 s. */
export async function markerOf(cdpWsUrl: string, pageUrl: string): Promise<string | null> {
  const browser = await chromium.connectOverCDP(cdpWsUrl, { timeout: 30_000 });
  try {
    const context = browser.contexts()[0] ?? (await browser.newContext());
    const tab = await context.newPage();
    await tab.goto(pageUrl);
    return await tab
      .waitForFunction('document.documentElement.dataset.ext', undefined, { timeout: 5000 })
      .then(() => tab.evaluate<string | null>('document.documentElement.dataset.ext ?? null'))
      .catch(() => null);
  } finally {
    await browser.close().catch(() => undefined);
  }
}
