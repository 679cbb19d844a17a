import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { stat } from 'node:fs/promises';
import path from 'node:path';
import yauzl from 'yauzl';
import { chromium } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { systemClock } from '../../api/src/clock.js';
import { errorFields } from '../support/http.js';
import { sseBlocks } from '../support/sse.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { startTestPageServer } from '../support/test-page-server.js';
import { newProject } from './browsers.fixtures.js';
import { fsGet, fsPut, newFsSession, rawRequest, readFile, uploadFiles, uploadZip, writeFile, zipOf, type FsSession } from './browser-fs.fixtures.js';

/** Every operation of CONTRACT.md §2.2 against a real browser session, through the API. */

interface Listed {
  name: string;
  path: string;
  is_dir: boolean;
}

let app: TestApp;
let fs: FsSession;

beforeAll(async () => {
  app = await startTestApp({ clock: systemClock });
  const { http } = await newProject(app.tenant.http);
  fs = await newFsSession(app, http);
});
afterAll(async () => {
  await app?.close();
});

function zipEntries(bytes: Buffer): Promise<Record<string, string>> {
  return new Promise((resolve, reject) => {
    yauzl.fromBuffer(bytes, { lazyEntries: true }, (error, zip) => {
      if (error) return reject(error);
      const out: Record<string, string> = {};
      zip.on('entry', (entry: yauzl.Entry) => {
        if (entry.fileName.endsWith('/')) return zip.readEntry();
        zip.openReadStream(entry, (failure, stream) => {
          if (failure) return reject(failure);
          const chunks: Buffer[] = [];
          stream.on('data', (chunk: Buffer) => chunks.push(chunk));
          stream.on('end', () => {
            out[entry.fileName] = Buffer.concat(chunks).toString();
            zip.readEntry();
          });
        });
      });
      zip.on('end', () => resolve(out));
      zip.readEntry();
    });
  });
}

describe('write_file and read_file', () => {
  it('writes raw bytes with the default mode 644 and reads them back', async () => {
    const bytes = Buffer.from([0, 1, 2, 255, 254]);
    expect((await writeFile(fs, '/a/b/bytes.bin', bytes)).status).toBe(204);
    const read = await readFile(fs, '/a/b/bytes.bin');
    expect(read.status).toBe(200);
    expect(read.headers.get('content-type')).toBe('application/octet-stream');
    expect(read.bytes.equals(bytes)).toBe(true);
    const info = await stat(path.join(fs.hostRoot, 'a/b/bytes.bin'));
    expect(info.mode & 0o777).toBe(0o644);
  });

  it('honours mode and gives the file to the browser user', async () => {
    expect((await writeFile(fs, '/mode.txt', 'x', '600')).status).toBe(204);
    const info = await stat(path.join(fs.hostRoot, 'mode.txt'));
    expect(info.mode & 0o777).toBe(0o600);
    expect(info.uid).toBe((await stat(fs.hostRoot)).uid);
  });

  it('replaces an existing file', async () => {
    await writeFile(fs, '/replace.txt', 'a long first version');
    await writeFile(fs, '/replace.txt', 'short');
    expect((await readFile(fs, '/replace.txt')).text).toBe('short');
  });

  it.each([
    ['a relative path', { path: 'relative.txt' }, 'query.path'],
    ['a bad mode', { path: '/bad-mode.txt', mode: '999' }, 'query.mode'],
    ['a mode with letters', { path: '/bad-mode.txt', mode: 'rwx' }, 'query.mode'],
    ['a missing path', {}, 'query.path'],
  ])('refuses %s with 400 and writes nothing', async (_, query, field) => {
    const res = await rawRequest(fs.client, 'PUT', `/browsers/${fs.id}/fs/write_file?${new URLSearchParams(query as Record<string, string>).toString()}`, 'data', {
      'content-type': 'application/octet-stream',
    });
    expect(res.status, res.text).toBe(400);
    expect(errorFields(res)).toContain(field);
    await expect(stat(path.join(fs.hostRoot, 'bad-mode.txt'))).rejects.toThrow();
    await expect(stat(path.join(fs.hostRoot, 'relative.txt'))).rejects.toThrow();
  });

  it('refuses a JSON body with 415', async () => {
    const res = await rawRequest(fs.client, 'PUT', `/browsers/${fs.id}/fs/write_file?path=/j.txt`, '{}', { 'content-type': 'application/json' });
    expect(res.status).toBe(415);
  });

  it('answers 404 not_found for a missing file and 400 for a directory', async () => {
    const missing = await readFile(fs, '/nope.txt');
    expect(missing.status).toBe(404);
    expect(missing.body.code).toBe('not_found');
    expect((await readFile(fs, '/Downloads')).status).toBe(400);
  });

  it('answers 404 for an unknown session and for one of another project', async () => {
    expect((await readFile({ ...fs, id: 'nosuchsession' }, '/x')).status).toBe(404);
    const { http: other } = await newProject(app.tenant.http);
    expect((await readFile({ ...fs, client: other }, '/a/b/bytes.bin')).status).toBe(404);
  });
});

describe('file_info and list_files', () => {
  it('describes files and directories', async () => {
    await writeFile(fs, '/info/f.txt', 'hello');
    const file = await fsGet(fs, 'file_info', '/info/f.txt');
    expect(file.status).toBe(200);
    expect(file.body).toMatchObject({ name: 'f.txt', path: '/info/f.txt', is_dir: false, size_bytes: 5, mode: '-rw-r--r--' });
    expect(new Date(file.body.mod_time).getTime()).toBeGreaterThan(Date.now() - 60_000);
    const dir = await fsGet(fs, 'file_info', '/info');
    expect(dir.body).toMatchObject({ name: 'info', path: '/info', is_dir: true, size_bytes: 0, mode: 'drwxr-xr-x' });
    expect((await fsGet(fs, 'file_info', '/info/none')).status).toBe(404);
    expect((await fsGet(fs, 'file_info', 'info')).status).toBe(400);
  });

  it('lists a directory as a bare array, and the root holds Downloads', async () => {
    await writeFile(fs, '/list/one.txt', '1');
    await writeFile(fs, '/list/sub/two.txt', '22');
    const list = await fsGet(fs, 'list_files', '/list');
    expect(list.status).toBe(200);
    expect((list.body as Listed[]).map((f) => [f.path, f.is_dir])).toEqual([
      ['/list/one.txt', false],
      ['/list/sub', true],
    ]);
    const root = await fsGet(fs, 'list_files', '/');
    expect((root.body as Listed[]).map((f) => f.name)).toContain('Downloads');
    expect((await fsGet(fs, 'list_files', '/list/one.txt')).status).toBe(400);
  });
});

describe('directories, delete, move, permissions', () => {
  it('creates directories with mode 755 by default or the given mode', async () => {
    expect((await fsPut(fs, 'create_directory', { path: '/made/deep' })).status).toBe(204);
    expect((await stat(path.join(fs.hostRoot, 'made/deep'))).mode & 0o777).toBe(0o755);
    expect((await fsPut(fs, 'create_directory', { path: '/made700', mode: '700' })).status).toBe(204);
    expect((await stat(path.join(fs.hostRoot, 'made700'))).mode & 0o777).toBe(0o700);
    expect((await fsPut(fs, 'create_directory', { path: '/x', mode: '8' })).status).toBe(400);
    expect((await fsPut(fs, 'create_directory', { path: '/x', extra: 1 })).status).toBe(400);
  });

  it('deletes files and directory trees', async () => {
    await writeFile(fs, '/del/tree/a.txt', 'a');
    await writeFile(fs, '/del/file.txt', 'f');
    expect((await fsPut(fs, 'delete_file', { path: '/del/tree' })).status).toBe(400);
    expect((await fsPut(fs, 'delete_file', { path: '/del/file.txt' })).status).toBe(204);
    expect((await fsPut(fs, 'delete_file', { path: '/del/file.txt' })).status).toBe(404);
    expect((await fsPut(fs, 'delete_directory', { path: '/del/tree' })).status).toBe(204);
    expect((await fsGet(fs, 'list_files', '/del')).body).toEqual([]);
    expect((await fsPut(fs, 'delete_directory', { path: '/' })).status).toBe(400);
    expect((await fsPut(fs, 'delete_directory', { path: '/del/none' })).status).toBe(404);
  });

  it('moves files and directories', async () => {
    await writeFile(fs, '/mv/src.txt', 'moved');
    expect((await fsPut(fs, 'move', { src_path: '/mv/src.txt', dest_path: '/mv/dest.txt' })).status).toBe(204);
    expect((await readFile(fs, '/mv/dest.txt')).text).toBe('moved');
    expect((await readFile(fs, '/mv/src.txt')).status).toBe(404);
    expect((await fsPut(fs, 'move', { src_path: '/mv', dest_path: '/mv2' })).status).toBe(204);
    expect((await readFile(fs, '/mv2/dest.txt')).text).toBe('moved');
    expect((await fsPut(fs, 'move', { src_path: '/none', dest_path: '/x' })).status).toBe(404);
    expect((await fsPut(fs, 'move', { src_path: '/mv2', dest_path: 'x' })).status).toBe(400);
  });

  it('sets mode, owner and group', async () => {
    await writeFile(fs, '/perm.txt', 'p');
    expect((await fsPut(fs, 'set_file_permissions', { path: '/perm.txt', mode: '640' })).status).toBe(204);
    expect((await fsGet(fs, 'file_info', '/perm.txt')).body.mode).toBe('-rw-r-----');
    // Only the browser's own user and group (browser-fs-limits.test.ts tries the others).
    const own = await stat(path.dirname(fs.hostRoot));
    expect((await fsPut(fs, 'set_file_permissions', { path: '/perm.txt', mode: '644', owner: String(own.uid), group: String(own.gid) })).status).toBe(204);
    expect((await stat(path.join(fs.hostRoot, 'perm.txt'))).uid).toBe(own.uid);
    expect((await fsPut(fs, 'set_file_permissions', { path: '/perm.txt', mode: '644', owner: 'root', group: '0' })).status).toBe(400);
    const setuid = await fsPut(fs, 'set_file_permissions', { path: '/perm.txt', mode: '4755' });
    expect(setuid.status).toBe(400);
    expect((await fsPut(fs, 'set_file_permissions', { path: '/perm.txt', mode: '644', owner: 'no-such-user' })).status).toBe(400);
    expect((await fsPut(fs, 'set_file_permissions', { path: '/perm.txt' })).status).toBe(400);
    expect((await fsPut(fs, 'set_file_permissions', { path: '/none', mode: '644' })).status).toBe(404);
  });
});

describe('zip and multipart', () => {
  it('downloads a directory as a zip', async () => {
    await writeFile(fs, '/zipme/a.txt', 'A');
    await writeFile(fs, '/zipme/sub/b.txt', 'B');
    const res = await rawRequest(fs.client, 'GET', `/browsers/${fs.id}/fs/download_dir_zip?path=/zipme`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/zip');
    expect(await zipEntries(res.bytes)).toEqual({ 'a.txt': 'A', 'sub/b.txt': 'B' });
    expect((await rawRequest(fs.client, 'GET', `/browsers/${fs.id}/fs/download_dir_zip?path=/nothing`)).status).toBe(404);
  });

  it('uploads several files from multipart parts', async () => {
    const res = await uploadFiles(fs, [
      { dest: '/up/one.txt', content: 'first' },
      { dest: '/up/deeper/two.txt', content: 'second' },
    ]);
    expect(res.status, res.text).toBe(204);
    expect((await readFile(fs, '/up/one.txt')).text).toBe('first');
    expect((await readFile(fs, '/up/deeper/two.txt')).text).toBe('second');
    expect((await uploadFiles(fs, [{ dest: 'relative', content: 'x' }])).status).toBe(400);
    const notMultipart = await rawRequest(fs.client, 'POST', `/browsers/${fs.id}/fs/upload`, 'x', { 'content-type': 'text/plain' });
    expect(notMultipart.status).toBe(415);
  });

  it('extracts an uploaded zip into dest_path', async () => {
    const res = await uploadZip(fs, '/unzipped', await zipOf({ 'top.txt': 'T', 'dir/inner.txt': 'I' }));
    expect(res.status, res.text).toBe(204);
    expect((await readFile(fs, '/unzipped/top.txt')).text).toBe('T');
    expect((await readFile(fs, '/unzipped/dir/inner.txt')).text).toBe('I');
    expect((await uploadZip(fs, '/unzipped', Buffer.from('not a zip'))).status).toBe(400);
  });
});

describe('watch', () => {
  it('streams CREATE, WRITE and DELETE events as SSE, and stops', async () => {
    await fsPut(fs, 'create_directory', { path: '/watched' });
    const started = await fs.client.post(`/browsers/${fs.id}/fs/watch`, { path: '/watched', recursive: true });
    expect(started.status, started.text).toBe(200);
    const watchId = started.body.watch_id as string;
    const controller = new AbortController();
    const stream = await fetch(`${fs.client.baseUrl}/browsers/${fs.id}/fs/watch/${watchId}/events`, {
      headers: { ...fs.client.extraHeaders, authorization: `Bearer ${fs.client.key}` },
      signal: controller.signal,
    });
    expect(stream.status).toBe(200);
    expect(stream.headers.get('content-type')).toContain('text/event-stream');
    await writeFile(fs, '/watched/new.txt', 'n');
    await fsPut(fs, 'delete_file', { path: '/watched/new.txt' });
    const events: { type: string; path: string }[] = [];
    for await (const block of sseBlocks(stream.body as unknown as AsyncIterable<Uint8Array>)) {
      if (block.data[0] !== undefined) events.push(JSON.parse(block.data[0]));
      if (events.some((e) => e.type === 'DELETE')) break;
    }
    controller.abort();
    expect(events.map((e) => e.type)).toEqual(expect.arrayContaining(['CREATE', 'DELETE']));
    expect(events.every((e) => e.path === '/watched/new.txt')).toBe(true);
    expect((await fs.client.delete(`/browsers/${fs.id}/fs/watch/${watchId}`)).status).toBe(204);
    expect((await fs.client.delete(`/browsers/${fs.id}/fs/watch/${watchId}`)).status).toBe(404);
    expect((await fs.client.post(`/browsers/${fs.id}/fs/watch`, { path: '/nowhere' })).status).toBe(404);
  });
});

describe('the downloads folder', () => {
  it('holds a file a page can pick through a file input (CDP DOM.setFileInputFiles)', async () => {
    const pages = await startTestPageServer({
      '/pick':
        '<title>waiting</title><input type="file" id="f">' +
        '<script>document.getElementById("f").addEventListener("change", async (e) => { document.title = "got " + await e.target.files[0].text(); });</script>',
    });
    expect((await writeFile(fs, '/Downloads/pick-me.txt', 'picked content')).status).toBe(204);
    const browser = await chromium.connectOverCDP(fs.cdpWsUrl);
    try {
      const page = await (browser.contexts()[0] ?? (await browser.newContext())).newPage();
      await page.goto(`${pages.url}/pick`);
      const cdp = await page.context().newCDPSession(page);
      const { root } = await cdp.send('DOM.getDocument');
      const { nodeId } = await cdp.send('DOM.querySelector', { nodeId: root.nodeId, selector: '#f' });
      // Playwright's setInputFiles would read the file on the client; this hands Chromium
      // the path as the browser sees it (in local mode: the host path of /Downloads).
      await cdp.send('DOM.setFileInputFiles', { nodeId, files: [path.join(fs.hostRoot, 'Downloads/pick-me.txt')] });
      await page.waitForFunction('document.title.startsWith("got")');
      expect(await page.title()).toBe('got picked content');
    } finally {
      await browser.close().catch(() => undefined);
      await pages.close();
    }
  });
});

describe('downloads', () => {
  it('land in /Downloads when the client sets no download behaviour of its own', async () => {
    const server = createServer((_request, response) => {
      response.writeHead(200, { 'content-type': 'application/octet-stream', 'content-disposition': 'attachment; filename="fetched.bin"' });
      response.end('downloaded bytes');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    // Raw CDP: Playwright and puppeteer set their own download directory on connect.
    const socket = new WebSocket(fs.cdpWsUrl);
    try {
      await new Promise((resolve, reject) => {
        socket.once('open', resolve);
        socket.once('error', reject);
      });
      socket.send(JSON.stringify({ id: 1, method: 'Target.createTarget', params: { url: `http://127.0.0.1:${port}/file` } }));
      let found: { name: string }[] = [];
      for (let i = 0; i < 50 && !found.some((f) => f.name === 'fetched.bin'); i++) {
        await new Promise((resolve) => setTimeout(resolve, 100));
        found = (await fsGet(fs, 'list_files', '/Downloads')).body as { name: string }[];
      }
      expect(found.map((f) => f.name)).toContain('fetched.bin');
      expect((await readFile(fs, '/Downloads/fetched.bin')).text).toBe('downloaded bytes');
    } finally {
      socket.close();
      server.close();
    }
  });
});
