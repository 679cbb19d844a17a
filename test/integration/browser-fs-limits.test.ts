import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomBytes } from 'node:crypto';
import { readdir, readFile as readHostFile, stat } from 'node:fs/promises';
import path from 'node:path';
import yazl from 'yazl';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { systemClock } from '../../api/src/clock.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { newProject } from './browsers.fixtures.js';
import { fsGet, fsPut, newFsSession, rawRequest, readFile, uploadZip, writeFile, zipOf, type FsSession } from './browser-fs.fixtures.js';

/**
 * The file API's limits (issue 16, items 3, 5 and 7) through the API against a real
 * browser: modes and owners that would make setuid or foreign files, the disk quota
 * (counting what the page downloads), zip bombs, and names past NAME_MAX. Each refusal
 * must change nothing. The agents run with small limits, as the service passes them.
 */

const QUOTA_MB = 24;
const MIB = 1024 * 1024;

let app: TestApp;
let fs: FsSession;

beforeAll(async () => {
  app = await startTestApp({
    clock: systemClock,
    agentFsEnv: { AGENT_FS_QUOTA_MB: String(QUOTA_MB), AGENT_FS_ZIP_MAX_MB: '8', AGENT_FS_ZIP_MAX_ENTRIES: '50' },
  });
  const { http } = await newProject(app.tenant.http);
  fs = await newFsSession(app, http);
});
afterAll(async () => {
  await app?.close();
});

const host = (virtual: string) => path.join(fs.hostRoot, virtual);
const exists = (virtual: string) => stat(host(virtual)).then(
  () => true,
  () => false,
);

describe('set_file_permissions and modes (item 3)', () => {
  it('refuses setuid, setgid and sticky bits everywhere a mode is taken, changing nothing', async () => {
    expect((await writeFile(fs, '/perm.bin', 'p', '644')).status).toBe(204);
    const before = await stat(host('perm.bin'));
    for (const mode of ['4755', '2755', '6755', '1777', '7777']) {
      const res = await fsPut(fs, 'set_file_permissions', { path: '/perm.bin', mode });
      expect(res.status, mode).toBe(400);
      expect((await writeFile(fs, `/w-${mode}.bin`, 'x', mode)).status, mode).toBe(400);
      expect((await fsPut(fs, 'create_directory', { path: `/d-${mode}`, mode })).status, mode).toBe(400);
      expect(await exists(`w-${mode}.bin`)).toBe(false);
      expect(await exists(`d-${mode}`)).toBe(false);
    }
    const after = await stat(host('perm.bin'));
    expect(after.mode).toBe(before.mode);
    expect(after.mode & 0o7000).toBe(0);
    // 4 digits with a leading 0 are plain permission bits.
    expect((await fsPut(fs, 'set_file_permissions', { path: '/perm.bin', mode: '0600' })).status).toBe(204);
    expect((await stat(host('perm.bin'))).mode & 0o7777).toBe(0o600);
  });

  it('refuses any owner or group but the browser’s own, by name or number, changing nothing', async () => {
    const own = await stat(path.dirname(fs.hostRoot));
    const before = await stat(host('perm.bin'));
    const foreign = [
      { owner: 'root' },
      { owner: '0' },
      { owner: 'postgres' },
      { owner: 'nobody' },
      { owner: String(own.uid + 1) },
      { group: 'disk' },
      { group: 'shadow' },
      { group: '0' },
      { group: String(own.gid + 1) },
      { owner: 'no-such-user' },
    ];
    for (const who of foreign) {
      const res = await fsPut(fs, 'set_file_permissions', { path: '/perm.bin', mode: '755', ...who });
      expect(res.status, JSON.stringify(who)).toBe(400);
      expect(res.body.code, JSON.stringify(who)).toBe('owner_not_allowed');
    }
    const after = await stat(host('perm.bin'));
    expect([after.uid, after.gid, after.mode]).toEqual([before.uid, before.gid, before.mode]);
    // The browser's own user and group are allowed, by number and by name.
    const ok = await fsPut(fs, 'set_file_permissions', { path: '/perm.bin', mode: '640', owner: String(own.uid), group: String(own.gid) });
    expect(ok.status).toBe(204);
    const names = await ownNames(own.uid, own.gid);
    if (names.user) expect((await fsPut(fs, 'set_file_permissions', { path: '/perm.bin', mode: '640', owner: names.user })).status).toBe(204);
    if (names.group) expect((await fsPut(fs, 'set_file_permissions', { path: '/perm.bin', mode: '640', group: names.group })).status).toBe(204);
    expect((await stat(host('perm.bin'))).uid).toBe(own.uid);
  });
});

async function ownNames(uid: number, gid: number): Promise<{ user?: string; group?: string }> {
  const find = async (file: string, id: number) =>
    (await readHostFile(file, 'utf8'))
      .split('\n')
      .map((line) => line.split(':'))
      .find((fields) => fields[2] === String(id))?.[0];
  return { user: await find('/etc/passwd', uid), group: await find('/etc/group', gid) };
}

describe('names past NAME_MAX (item 7)', () => {
  it('answers 400 name_too_long on every route, not 502', async () => {
    const long = `/${'n'.repeat(300)}`;
    const nested = `/Downloads/${'é'.repeat(130)}/x`;
    const answers = [
      await writeFile(fs, long, 'x'),
      await writeFile(fs, nested, 'x'),
      await readFile(fs, long),
      await fsGet(fs, 'file_info', long),
      await fsGet(fs, 'list_files', nested),
      await rawRequest(fs.client, 'GET', `/browsers/${fs.id}/fs/download_dir_zip?${new URLSearchParams({ path: long }).toString()}`),
      await fsPut(fs, 'create_directory', { path: long }),
      await fsPut(fs, 'delete_file', { path: long }),
      await fsPut(fs, 'delete_directory', { path: long }),
      await fsPut(fs, 'move', { src_path: '/perm.bin', dest_path: long }),
      await fsPut(fs, 'set_file_permissions', { path: long, mode: '644' }),
      await fs.client.post(`/browsers/${fs.id}/fs/watch`, { path: long }),
    ];
    for (const [i, res] of answers.entries()) {
      expect(res.status, `answer ${i}: ${res.text}`).toBe(400);
      expect(res.body.code, `answer ${i}`).toBe('name_too_long');
    }
    expect(await exists('perm.bin')).toBe(true);
  });
});

describe('disk quota (item 5)', () => {
  it('refuses a write past the quota with 413, leaves no partial file, and lets writes go on once files are deleted', async () => {
    expect((await writeFile(fs, '/big-1.bin', randomBytes(14 * MIB))).status).toBe(204);
    const over = await writeFile(fs, '/big-2.bin', randomBytes(14 * MIB));
    expect(over.status).toBe(413);
    expect(over.body.code).toBe('quota_exceeded');
    expect(await exists('big-2.bin')).toBe(false);
    // Multipart parts count too, whichever order they come in.
    const form = new FormData();
    form.append('files[0][file]', new Blob([new Uint8Array(randomBytes(14 * MIB))]), 'f.bin');
    form.append('files[0][dest_path]', '/big-3.bin');
    const upload = await rawRequest(fs.client, 'POST', `/browsers/${fs.id}/fs/upload`, form);
    expect(upload.status).toBe(413);
    expect(upload.body.code).toBe('quota_exceeded');
    expect(await exists('big-3.bin')).toBe(false);
    expect(await readdir(path.join(path.dirname(fs.hostRoot), 'tmp')).then((names) => names.filter((n) => n.startsWith('part-')))).toEqual([]);
    // Freed by a delete, the room is there again.
    expect((await fsPut(fs, 'delete_file', { path: '/big-1.bin' })).status).toBe(204);
    expect((await writeFile(fs, '/big-2.bin', randomBytes(14 * MIB))).status).toBe(204);
    expect((await stat(host('big-2.bin'))).size).toBe(14 * MIB);
    expect((await fsPut(fs, 'delete_file', { path: '/big-2.bin' })).status).toBe(204);
  });

  it('counts what the page downloads into /Downloads', async () => {
    const body = randomBytes(16 * MIB);
    const server = createServer((_request, response) => {
      response.writeHead(200, { 'content-type': 'application/octet-stream', 'content-disposition': 'attachment; filename="page.bin"' });
      response.end(body);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    // A 12 MiB write fits before the download...
    expect((await writeFile(fs, '/before.bin', randomBytes(12 * MIB))).status).toBe(204);
    expect((await fsPut(fs, 'delete_file', { path: '/before.bin' })).status).toBe(204);
    const socket = new WebSocket(fs.cdpWsUrl);
    try {
      await new Promise((resolve, reject) => {
        socket.once('open', resolve);
        socket.once('error', reject);
      });
      const { port } = server.address() as AddressInfo;
      socket.send(JSON.stringify({ id: 1, method: 'Target.createTarget', params: { url: `http://127.0.0.1:${port}/file` } }));
      for (let i = 0; i < 100 && (await stat(host('Downloads/page.bin')).catch(() => undefined))?.size !== body.length; i++) {
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      console.log(`Downloads after the page's download: ${(await readdir(host('Downloads'))).join(', ')}`);
      expect((await stat(host('Downloads/page.bin'))).size).toBe(body.length);
      // ...and not after it: the page's 16 MiB are the browser's files too.
      const after = await writeFile(fs, '/after.bin', randomBytes(12 * MIB));
      expect(after.status).toBe(413);
      expect(after.body.code).toBe('quota_exceeded');
      expect(await exists('after.bin')).toBe(false);
    } finally {
      socket.close();
      server.close();
      await fsPut(fs, 'delete_file', { path: '/Downloads/page.bin' });
    }
  }, 60_000);
});

describe('upload_zip bounds (item 5)', () => {
  const expectNothingLeft = async (dest: string) => expect(await exists(dest.slice(1))).toBe(false);

  it('refuses a zip bomb (expansion ratio over the limit) and writes nothing', async () => {
    const zip = new yazl.ZipFile();
    zip.addBuffer(Buffer.alloc(7 * MIB), 'zeros.bin');
    zip.end();
    const bytes = await collect(zip.outputStream);
    console.log(`zip bomb: ${bytes.length} bytes expanding to ${7 * MIB} (ratio ${Math.round((7 * MIB) / bytes.length)})`);
    const res = await uploadZip(fs, '/bomb', bytes);
    expect(res.status).toBe(413);
    expect(res.body.code).toBe('zip_ratio_too_high');
    await expectNothingLeft('/bomb');
  });

  it('refuses a zip past the total uncompressed size and writes nothing', async () => {
    const zip = new yazl.ZipFile();
    zip.addBuffer(randomBytes(5 * MIB), 'a.bin', { compress: false });
    zip.addBuffer(randomBytes(5 * MIB), 'b.bin', { compress: false });
    zip.end();
    const res = await uploadZip(fs, '/huge', await collect(zip.outputStream));
    expect(res.status).toBe(413);
    expect(res.body.code).toBe('zip_too_large');
    await expectNothingLeft('/huge');
  });

  it('refuses a zip with too many entries and writes nothing', async () => {
    const files = Object.fromEntries(Array.from({ length: 60 }, (_, i) => [`f${i}.txt`, String(i)]));
    const res = await uploadZip(fs, '/many', await zipOf(files));
    expect(res.status).toBe(413);
    expect(res.body.code).toBe('too_many_entries');
    await expectNothingLeft('/many');
    // Within the limits, a zip still extracts.
    expect((await uploadZip(fs, '/few', await zipOf({ 'a.txt': 'a', 'd/b.txt': 'b' }))).status).toBe(204);
    expect((await readFile(fs, '/few/d/b.txt')).text).toBe('b');
  });
});

function collect(stream: NodeJS.ReadableStream): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    stream.on('data', (chunk: Buffer) => chunks.push(chunk));
    stream.on('end', () => resolve(Buffer.concat(chunks)));
    stream.on('error', reject);
  });
}
