import type Kernel from '@onkernel/sdk';
import { BadRequestError, NotFoundError, toFile } from '@onkernel/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { markerOf as markerOfPage, startMarkerPage, type MarkerPage } from './support/marker-page.js';
import { rejection, unique } from './support/sdk.js';
import { cleanupServices, startService, type RunningService } from '../support/service.js';
import { markerZip, zipOf } from '../support/extension-zip.js';

/**
 * Extensions end to end: the built service driven by @onkernel/sdk, real Chromium, and
 * an MV3 extension whose content script marks every page (data-ext on <html>).
 */

let service: RunningService;
let kernel: Kernel;
let page: MarkerPage;

beforeAll(async () => {
  service = await startService();
  kernel = service.client();
  page = await startMarkerPage('127.0.0.33', 'extensions e2e');
});
afterAll(async () => {
  await cleanupServices();
  await page?.close();
});

const markerOf = (cdpWsUrl: string) => markerOfPage(cdpWsUrl, page.url);

describe('extensions through the SDK', () => {
  it('upload, get, list, download and delete', async () => {
    const zip = await markerZip();
    const name = unique('marker');
    const uploaded = await kernel.extensions.upload({ file: await toFile(zip, 'marker.zip'), name });
    expect(uploaded).toMatchObject({ name, size_bytes: zip.length });
    expect(await kernel.extensions.get(name)).toEqual(uploaded);
    const listed = [];
    for await (const extension of kernel.extensions.list({ name })) listed.push(extension.id);
    expect(listed).toEqual([uploaded.id]);
    const download = await kernel.extensions.download(uploaded.id);
    expect(Buffer.from(await download.arrayBuffer()).equals(zip)).toBe(true);
    const slip = await zipOf([{ name: 'manifest.json', data: '{"manifest_version":3,"name":"x","version":"1"}' }, { name: '../evil.js', data: '' }]);
    const refused = await rejection(kernel.extensions.upload({ file: await toFile(slip, 'slip.zip') }), BadRequestError);
    expect(refused.status).toBe(400);
    await kernel.extensions.delete(name);
    await rejection(kernel.extensions.get(name), NotFoundError);
  });

  it('browsers.create with an extension marks pages; loadExtensions loads one into a running browser', async () => {
    const stored = await kernel.extensions.upload({ file: await toFile(await markerZip({ value: 'at-create' }), 'm.zip'), name: unique('create') });
    const withIt = await kernel.browsers.create({ headless: true, extensions: [{ id: stored.id }] });
    expect(await markerOf(withIt.cdp_ws_url)).toBe('at-create');
    await kernel.browsers.deleteByID(withIt.session_id);

    const running = await kernel.browsers.create({ headless: true });
    expect(await markerOf(running.cdp_ws_url)).toBeNull();
    await kernel.browsers.loadExtensions(running.session_id, { extensions: [{ name: 'marker', zip_file: await toFile(await markerZip({ value: 'loaded' }), 'marker.zip') }] });
    expect(await markerOf(running.cdp_ws_url)).toBe('loaded');
    await kernel.browsers.deleteByID(running.session_id);
  });
});
