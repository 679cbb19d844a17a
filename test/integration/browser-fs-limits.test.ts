import { Agent as HttpAgent, createServer, request as httpRequest } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { randomBytes } from 'node:crypto';
import { deflateRawSync } from 'node:zlib';
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

  it('keeps the client connection usable after refusing a write it was still sending', async () => {
    // The API used to hand the client's own request to undici as the agent's body; when
    // the agent refused early and closed, undici destroyed it, and with it the client's
    // socket: the next request on that keep-alive connection got ECONNRESET (seen in a full
    // run, on the write after a refused upload). Now the rest is read and dropped.
    const agent = new HttpAgent({ keepAlive: true, maxSockets: 1 });
    const put = (virtual: string, size: number) =>
      new Promise<{ status: number; socket: Socket }>((resolve, reject) => {
        const url = new URL(`${fs.client.baseUrl}/browsers/${fs.id}/fs/write_file?path=${encodeURIComponent(virtual)}`);
        const headers = { ...fs.client.extraHeaders, authorization: `Bearer ${fs.client.key}`, 'content-type': 'application/octet-stream', 'content-length': String(size) };
        const request = httpRequest(url, { method: 'PUT', agent, headers }, (response) => {
          response.resume();
          response.on('end', () => resolve({ status: response.statusCode!, socket: request.socket! }));
        });
        request.on('error', reject);
        request.end(Buffer.alloc(size));
      });
    try {
      // The same socket carries the next request. Not request.reusedSocket: Node's agent
      // sets that only for a socket taken from its free list, and a request queued while
      // the refused one was still sending gets the socket handed over directly.
      const refused = await put('/over.bin', (QUOTA_MB + 8) * MIB);
      expect(refused.status).toBe(413);
      const next = await put('/after-refusal.bin', MIB);
      expect(next.status).toBe(204);
      expect(next.socket === refused.socket).toBe(true);
      expect(await exists('over.bin')).toBe(false);
      expect((await fsPut(fs, 'delete_file', { path: '/after-refusal.bin' })).status).toBe(204);
    } finally {
      agent.destroy();
    }
  }, 60_000);

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

describe('upload_zip with lying headers', () => {
  it('refuses an entry that inflates past its declared size with 400 invalid_zip, writes nothing, and the browser lives on', async () => {
    // 4 MiB of zeros whose local and central headers both declare 1000 bytes: under every
    // declared limit, so only the inflate itself can tell (the red-team zip did 1.2 GiB).
    const bytes = lyingZip('lie.bin', 4 * MIB, 1000);
    console.log(`lying zip: ${bytes.length} bytes declaring 1000, inflating to ${4 * MIB}`);
    const res = await uploadZip(fs, '/liar', bytes);
    expect(res.status, res.text).toBe(400);
    expect(res.body.code).toBe('invalid_zip');
    expect(await exists('liar/lie.bin')).toBe(false);
    // Give a crash the time it took in the red-team run (~0.2 s) to show.
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const session = await fs.client.get(`/browsers/${fs.id}`);
    expect(session.status).toBe(200);
    expect(session.body.deleted_at ?? null, session.text).toBeNull();
    expect(await browserVersion(fs.cdpWsUrl)).toMatch(/Chrom/);
    expect((await writeFile(fs, '/after-liar.txt', 'ok')).status).toBe(204);
  });
});

describe('truncated multipart bodies', () => {
  it('answers 400 invalid_multipart when the form ends inside a file part, leaves nothing, and the browser lives on', async () => {
    const boundary = 'truncated-boundary';
    for (const [op, parts] of [
      ['upload', [['files[0][dest_path]', '/cut.bin'], ['files[0][file]', null]]],
      ['upload', [['files[0][file]', null]]],
      ['upload_zip', [['dest_path', '/cut-zip'], ['zip_file', null]]],
    ] as const) {
      // Every part but the last is whole; the last stops mid-content with no closing boundary.
      const head = parts
        .map(([name, value]) =>
          value === null
            ? `--${boundary}\r\ncontent-disposition: form-data; name="${name}"; filename="f.bin"\r\ncontent-type: application/octet-stream\r\n\r\n`
            : `--${boundary}\r\ncontent-disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`,
        )
        .join('');
      const body = Buffer.concat([Buffer.from(head), randomBytes(256 * 1024)]);
      const res = await rawRequest(fs.client, 'POST', `/browsers/${fs.id}/fs/${op}`, new Uint8Array(body), { 'content-type': `multipart/form-data; boundary=${boundary}` });
      console.log(`truncated ${op} (${parts.map(([name]) => name).join(', ')}): ${res.status} ${res.text}`);
      expect(res.status, res.text).toBe(400);
      expect(res.body.code).toBe('invalid_multipart');
    }
    // A malformed part header: busboy reports it twice (then the form's end), which must not end the agent.
    for (const op of ['upload', 'upload_zip']) {
      const res = await rawRequest(fs.client, 'POST', `/browsers/${fs.id}/fs/${op}`, new Uint8Array(Buffer.from(`--${boundary}\r\nNone--${boundary}--\r\n`)), { 'content-type': `multipart/form-data; boundary=${boundary}` });
      expect(res.status, res.text).toBe(400);
      expect(res.body.code).toBe('invalid_multipart');
    }
    expect(await exists('cut.bin')).toBe(false);
    expect(await exists('cut-zip')).toBe(false);
    await new Promise((resolve) => setTimeout(resolve, 1000));
    expect(await browserVersion(fs.cdpWsUrl)).toMatch(/Chrom/);
  });
});

/** A one-entry deflated zip whose headers declare `declared` uncompressed bytes for `realBytes` zeros. */
function lyingZip(name: string, realBytes: number, declared: number): Buffer {
  const data = deflateRawSync(Buffer.alloc(realBytes));
  const fileName = Buffer.from(name);
  const local = Buffer.alloc(30);
  local.writeUInt32LE(0x04034b50, 0);
  local.writeUInt16LE(20, 4); // version needed
  local.writeUInt16LE(8, 8); // deflate
  local.writeUInt32LE(data.length, 18);
  local.writeUInt32LE(declared, 22);
  local.writeUInt16LE(fileName.length, 26);
  const central = Buffer.alloc(46);
  central.writeUInt32LE(0x02014b50, 0);
  central.writeUInt16LE((3 << 8) | 20, 4); // made by Unix
  central.writeUInt16LE(20, 6);
  central.writeUInt16LE(8, 10);
  central.writeUInt32LE(data.length, 20);
  central.writeUInt32LE(declared, 24);
  central.writeUInt16LE(fileName.length, 28);
  central.writeUInt32LE((0o100644 << 16) >>> 0, 38); // a regular file, rw-r--r--
  central.writeUInt32LE(0, 42); // local header at 0
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  end.writeUInt16LE(1, 8);
  end.writeUInt16LE(1, 10);
  end.writeUInt32LE(central.length + fileName.length, 12);
  end.writeUInt32LE(local.length + fileName.length + data.length, 16);
  return Buffer.concat([local, fileName, data, central, fileName, end]);
}

/** Browser.getVersion over the session's CDP endpoint: the browser answers. */
async function browserVersion(cdpWsUrl: string): Promise<string> {
  const socket = new WebSocket(cdpWsUrl);
  try {
    return await new Promise<string>((resolve, reject) => {
      socket.once('error', reject);
      socket.once('close', () => reject(new Error('CDP socket closed')));
      socket.once('open', () => socket.send(JSON.stringify({ id: 1, method: 'Browser.getVersion' })));
      socket.on('message', (data: Buffer) => {
        const message = JSON.parse(data.toString()) as { id?: number; result?: { product: string } };
        if (message.id === 1) resolve(message.result?.product ?? JSON.stringify(message));
      });
    });
  } finally {
    socket.close();
  }
}

function collect(stream: NodeJS.ReadableStream): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    stream.on('data', (chunk: Buffer) => chunks.push(chunk));
    stream.on('end', () => resolve(Buffer.concat(chunks)));
    stream.on('error', reject);
  });
}
