import http from 'node:http';
import { createHash, randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FixedClock } from '../../api/src/clock.js';
import { DEFAULT_EXTENSION_SETTINGS } from '../../api/src/modules/extensions/settings.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import type { HttpClient } from '../support/http.js';
import { crx3Of, markerManifest, markerZip, uploadForm, zipOf } from '../support/extension-zip.js';
import { newProject } from './browsers.fixtures.js';

/**
 * The extensions API against real Postgres. The Chrome Web Store cannot be reached from
 * here: its happy path runs against a local stand-in serving a CRX3 built in the test
 * (the service's BROWSERPLANE_CHROME_STORE_URL pointed at it); the unreachable case
 * points it at a closed port.
 */

let app: TestApp;
let store: http.Server;
let storeUrl: string;
const storeRequests: URL[] = [];
let storeZip: Buffer;

beforeAll(async () => {
  storeZip = await markerZip();
  store = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://store');
    storeRequests.push(url);
    const id = /id=([a-p]{32})/.exec(url.searchParams.get('x') ?? '')?.[1];
    if (id === 'a'.repeat(32)) return void res.writeHead(200, { 'content-type': 'application/x-chrome-extension' }).end(crx3Of(storeZip));
    if (id === 'b'.repeat(32)) return void res.writeHead(200).end('<html>not a package</html>');
    res.writeHead(204).end();
  });
  await new Promise<void>((resolve) => store.listen(0, '127.0.0.1', resolve));
  storeUrl = `http://127.0.0.1:${(store.address() as AddressInfo).port}/service/update2/crx`;
  app = await startTestApp({
    settings: { extensions: { ...DEFAULT_EXTENSION_SETTINGS, maxZipBytes: 64 * 1024, maxPerProject: 5, chromeStoreUrl: storeUrl } },
  });
});
afterAll(async () => {
  await app?.close();
  store?.closeAllConnections();
  await new Promise((resolve) => store?.close(resolve));
});

const headersOf = (client: HttpClient) => ({ ...client.extraHeaders, authorization: `Bearer ${client.key}` });
const post = (client: HttpClient, body: FormData) => fetch(`${client.baseUrl}/extensions`, { method: 'POST', headers: headersOf(client), body });
const raw = (client: HttpClient, path: string) => fetch(`${client.baseUrl}${path}`, { headers: headersOf(client) });

async function upload(client: HttpClient, zip: Buffer, name?: string) {
  const res = await post(client, uploadForm(zip, name));
  const body = (await res.json()) as Record<string, unknown>;
  expect(res.status, JSON.stringify(body)).toBe(200);
  return body as { id: string; name: string | null; size_bytes: number; checksum: string; created_at: string; last_used_at: null };
}

const count = async (client: HttpClient) => ((await client.get('/extensions?limit=100')).body as unknown[]).length;

describe('POST /extensions', () => {
  it('stores the zip byte for byte with its size and sha256; metadata and download give it back', async () => {
    const { http: client } = await newProject(app.tenant.http);
    const zip = await markerZip({ folder: 'marker' });
    const stored = await upload(client, zip, 'marker');
    expect(stored).toMatchObject({ name: 'marker', size_bytes: zip.length, checksum: createHash('sha256').update(zip).digest('hex'), last_used_at: null });
    expect(stored.id).toMatch(/^ext_/);
    expect((await client.get('/extensions/MARKER/metadata')).body).toEqual(stored);
    const download = await raw(client, `/extensions/${stored.id}`);
    expect(download.status).toBe(200);
    expect(download.headers.get('content-type')).toBe('application/zip');
    expect(Buffer.from(await download.arrayBuffer()).equals(zip)).toBe(true);
    expect((await upload(client, zip)).name).toBeNull();
  });

  it('refuses zip-slip, symlinks, no manifest, a bad manifest, a non-zip and a too large zip, storing nothing', async () => {
    const { http: client } = await newProject(app.tenant.http);
    const manifest = { name: 'manifest.json', data: JSON.stringify(markerManifest()) };
    const cases: [Buffer, number, string][] = [
      [await zipOf([manifest, { name: '../../evil.js', data: 'x' }]), 400, 'unsafe_entry'],
      [await zipOf([manifest, { name: '/etc/evil.js', data: 'x' }]), 400, 'unsafe_entry'],
      [await zipOf([manifest, { name: 'link.js', data: '/etc/passwd', mode: 0o120777 }]), 400, 'unsafe_entry'],
      [await zipOf([{ name: 'content.js', data: '' }]), 400, 'manifest_missing'],
      [await zipOf([{ name: 'manifest.json', data: '{"manifest_version": 3}' }]), 400, 'invalid_manifest'],
      [Buffer.from('not a zip at all'), 400, 'invalid_zip'],
      [await zipOf([manifest, { name: 'big.bin', data: randomBytes(200 * 1024) }]), 413, 'extension_too_large'],
    ];
    for (const [zip, status, reason] of cases) {
      const res = await post(client, uploadForm(zip, 'bad'));
      const body = (await res.json()) as { code: string; details: { code: string }[] };
      expect(res.status, JSON.stringify(body)).toBe(status);
      if (status === 400) expect(body).toMatchObject({ code: 'invalid_extension', details: [{ code: reason }] });
      else expect(body.code).toBe(reason);
    }
    expect(await count(client)).toBe(0);
  });

  it('refuses a bad name, a taken name, a missing file and the project’s limit', async () => {
    const { http: client } = await newProject(app.tenant.http);
    const zip = await markerZip();
    expect((await post(client, uploadForm(zip, '../x'))).status).toBe(400);
    expect((await post(client, uploadForm(zip, '..'))).status).toBe(400);
    await upload(client, zip, 'Taken');
    const taken = await post(client, uploadForm(zip, 'taken'));
    expect(taken.status).toBe(409);
    expect(((await taken.json()) as { code: string }).code).toBe('extension_name_taken');
    const noFile = new FormData();
    noFile.append('name', 'nofile');
    expect((await post(client, noFile)).status).toBe(400);
    const json = await client.post('/extensions', { name: 'x' });
    expect(json.status).toBe(415);
    for (let i = 0; i < 4; i += 1) await upload(client, zip);
    const full = await post(client, uploadForm(zip));
    expect(full.status).toBe(409);
    expect(((await full.json()) as { code: string }).code).toBe('extension_limit_reached');
    expect(await count(client)).toBe(5);
  });
});

describe('POST /extensions with malformed forms', () => {
  // busboy reports the first one twice (a bad part header, then the form's end); a second
  // 'error' with no listener ended the service (found by the fuzz tier).
  it.each([
    ['a part with a malformed header', '--xyz\r\nNone--xyz--\r\n'],
    ['a form cut off inside the zip', '--xyz\r\ncontent-disposition: form-data; name="file"; filename="a.zip"\r\n\r\nPK\u0003\u0004'],
    ['a closing boundary only', '--xyz--\r\n'],
  ])('answers %s with 400 and stores nothing', async (_label, body) => {
    const { http: client } = await newProject(app.tenant.http);
    const res = await fetch(`${client.baseUrl}/extensions`, { method: 'POST', headers: { ...headersOf(client), 'content-type': 'multipart/form-data; boundary=xyz' }, body });
    const answer = (await res.json()) as { code: string; message: string };
    expect(res.status, JSON.stringify(answer)).toBe(400);
    expect(answer.message).not.toBe('');
    expect(await count(client)).toBe(0);
    expect((await client.get('/extensions')).status).toBe(200);
  });
});

describe('GET /extensions', () => {
  it('pages newest first and filters by exact name or substring/id', async () => {
    const { http: client } = await newProject(app.tenant.http);
    const zip = await markerZip();
    const made = [];
    for (const name of ['alpha', 'beta', 'alphabet']) {
      made.push(await upload(client, zip, name));
      (app.clock as FixedClock).advance(1000);
    }
    const first = await client.get('/extensions?limit=2');
    expect(first.headers.get('x-has-more')).toBe('true');
    expect(first.headers.get('x-next-offset')).toBe('2');
    const second = await client.get('/extensions?limit=2&offset=2');
    expect(second.headers.get('x-has-more')).toBe('false');
    const ids = [...(first.body as { id: string }[]), ...(second.body as { id: string }[])].map((e) => e.id);
    expect(new Set(ids)).toEqual(new Set(made.map((m) => m.id)));
    const names = async (query: string) => (await client.get<{ name: string }[]>(`/extensions?${query}`)).body.map((e) => e.name).sort();
    expect(await names('name=ALPHA')).toEqual(['alpha']);
    expect(await names('query=alpha')).toEqual(['alpha', 'alphabet']);
    expect(await names(`query=${made[1]!.id}`)).toEqual(['beta']);
    expect((await client.get('/extensions?limit=0')).status).toBe(400);
  });
});

describe('another project', () => {
  it('gets 404 on get, download, delete and list sees nothing', async () => {
    const a = await newProject(app.tenant.http);
    const b = await newProject(app.tenant.http);
    const theirs = await upload(a.http, await markerZip(), 'secret');
    for (const key of [theirs.id, 'secret']) {
      expect((await b.http.get(`/extensions/${key}/metadata`)).status).toBe(404);
      expect((await raw(b.http, `/extensions/${key}`)).status).toBe(404);
      expect((await b.http.delete(`/extensions/${key}`)).status).toBe(404);
    }
    expect(await count(b.http)).toBe(0);
    expect((await a.http.get(`/extensions/${theirs.id}/metadata`)).status).toBe(200);
  });
});

describe('DELETE /extensions/{id_or_name}', () => {
  it('deletes by name, then 404; the name is free again', async () => {
    const { http: client } = await newProject(app.tenant.http);
    const zip = await markerZip();
    await upload(client, zip, 'gone');
    expect((await client.delete('/extensions/gone')).status).toBe(204);
    expect((await client.delete('/extensions/gone')).status).toBe(404);
    expect((await client.get('/extensions/gone/metadata')).status).toBe(404);
    await upload(client, zip, 'gone');
  });
});

describe('GET /extensions/from_chrome_store', () => {
  it('answers the zip inside the store’s CRX3 for the id in the URL', async () => {
    const res = await raw(app.tenant.http, `/extensions/from_chrome_store?url=${encodeURIComponent(`https://chromewebstore.google.com/detail/marker/${'a'.repeat(32)}`)}&os=mac`);
    expect(res.status).toBe(200);
    expect(Buffer.from(await res.arrayBuffer()).equals(storeZip)).toBe(true);
    const asked = storeRequests.at(-1)!;
    expect(asked.searchParams.get('os')).toBe('mac');
    expect(asked.searchParams.get('x')).toBe(`id=${'a'.repeat(32)}&uc`);
  });

  it('is 404 for an extension the store does not have, 424 for a non-package, 400 for a bad URL', async () => {
    const of = (url: string) => raw(app.tenant.http, `/extensions/from_chrome_store?url=${encodeURIComponent(url)}`);
    expect((await of(`https://chromewebstore.google.com/detail/x/${'c'.repeat(32)}`)).status).toBe(404);
    const invalid = await of(`https://chromewebstore.google.com/detail/x/${'b'.repeat(32)}`);
    expect(invalid.status).toBe(424);
    expect(((await invalid.json()) as { code: string }).code).toBe('chrome_store_invalid_package');
    expect((await of('https://evil.example/detail/x/' + 'a'.repeat(32))).status).toBe(400);
    expect((await of('not a url')).status).toBe(400);
    expect((await raw(app.tenant.http, '/extensions/from_chrome_store')).status).toBe(400);
  });

  it('says so with a 424 when the store cannot be reached', async () => {
    const closed = await startTestApp({ settings: { extensions: { ...DEFAULT_EXTENSION_SETTINGS, chromeStoreUrl: 'http://127.0.0.1:9/crx' } } });
    try {
      const res = await raw(closed.tenant.http, `/extensions/from_chrome_store?url=${'a'.repeat(32)}`);
      const body = (await res.json()) as { code: string; message: string };
      expect(res.status).toBe(424);
      expect(body.code).toBe('chrome_store_unreachable');
      expect(res.headers.get('x-should-retry')).toBe('false');
    } finally {
      await closed.close();
    }
  });
});
