import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { decompress } from 'fzstd';
import { Parser, type ReadEntry } from 'tar';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { errorFields, type HttpClient } from '../support/http.js';
import { startTestApp, type TestApp } from '../support/test-app.js';

interface Download {
  status: number;
  headers: Headers;
  bytes: Buffer;
}

/** GET …/download as raw bytes (the test HttpClient reads bodies as text). */
async function download(http: HttpClient, idOrName: string, query = ''): Promise<Download> {
  const headers: Record<string, string> = { ...http.extraHeaders, accept: 'application/octet-stream' };
  if (http.key) headers.authorization = `Bearer ${http.key}`;
  const res = await fetch(`${http.baseUrl}/profiles/${encodeURIComponent(idOrName)}/download${query}`, { headers });
  return { status: res.status, headers: res.headers, bytes: Buffer.from(await res.arrayBuffer()) };
}

interface TarEntry {
  type: string;
  body: Buffer;
  linkpath: string;
}

/** The entries of a tar read with node-tar, by path (directories without their trailing slash). */
async function tarEntries(bytes: Buffer): Promise<Map<string, TarEntry>> {
  const entries = new Map<string, TarEntry>();
  const parser = new Parser({ strict: true });
  parser.on('entry', (entry: ReadEntry) => {
    const chunks: Buffer[] = [];
    entry.on('data', (c: Buffer) => chunks.push(c));
    entry.on('end', () =>
      entries.set(entry.path.replace(/\/$/, ''), { type: entry.type, body: Buffer.concat(chunks), linkpath: entry.linkpath ?? '' }),
    );
  });
  await new Promise<void>((resolve, reject) => {
    parser.on('error', reject);
    parser.end(bytes, resolve);
  });
  return entries;
}

/** zstd decoded by fzstd, a pure-JS decoder independent of the zstd command the server runs. */
const unzstd = (bytes: Buffer): Buffer => Buffer.from(decompress(new Uint8Array(bytes)));

describe('profile download', () => {
  let app: TestApp;
  let http: HttpClient;
  let work: string;
  const big = randomBytes(3 * 1024 * 1024);

  beforeAll(async () => {
    app = await startTestApp();
    http = app.tenant.http;
    work = await mkdtemp(path.join(os.tmpdir(), 'profiles-download-'));
  });
  afterAll(async () => {
    await app?.close();
    if (work) await rm(work, { recursive: true, force: true });
  });

  /** A profile whose files a "session" saved: nested dirs, a symlink and a 3 MiB incompressible file. */
  const savedProfile = async (name: string, projectId = app.tenant.defaultProjectId, client = http) => {
    const res = await client.post('/profiles', { name });
    expect(res.status).toBe(200);
    const source = await mkdtemp(path.join(work, 'session-'));
    await mkdir(path.join(source, 'Default', 'Network'), { recursive: true });
    await writeFile(path.join(source, 'Default', 'Network', 'Cookies'), 'cookie-db');
    await writeFile(path.join(source, 'Local State'), '{"profile":{}}');
    await writeFile(path.join(source, 'blob.bin'), big);
    await symlink('Default/Network/Cookies', path.join(source, 'cookies-link'));
    await app.deps.profileStore.saveFrom({ orgId: app.tenant.orgId, projectId, profileId: res.body.id as string }, source);
    return res.body as { id: string; name: string };
  };

  const expectSessionFiles = (entries: Map<string, TarEntry>) => {
    expect([...entries.keys()].sort()).toEqual([
      'Default',
      'Default/Network',
      'Default/Network/Cookies',
      'Local State',
      'blob.bin',
      'cookies-link',
    ]);
    expect(entries.get('Default/Network/Cookies')?.body.toString()).toBe('cookie-db');
    expect(entries.get('blob.bin')?.body.equals(big)).toBe(true);
    expect(entries.get('cookies-link')).toMatchObject({ type: 'SymbolicLink', linkpath: 'Default/Network/Cookies' });
  };

  it('streams a zstd-compressed tar by default, which an independent decoder unpacks to the saved files', async () => {
    const profile = await savedProfile('zst-default');
    const res = await download(http, profile.name);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/zstd');
    expect(res.headers.get('content-disposition')).toBe('attachment; filename="zst-default.tar.zst"');
    expect(res.headers.get('cache-control')).toBe('no-store');
    expect(res.bytes.subarray(0, 4).toString('hex')).toBe('28b52ffd');
    expectSessionFiles(await tarEntries(unzstd(res.bytes)));
  });

  it('streams a plain tar for format=tar, byte for byte what the tar.zst decompresses to', async () => {
    const profile = await savedProfile('plain-tar');
    const tar = await download(http, profile.id, '?format=tar');
    expect(tar.status).toBe(200);
    expect(tar.headers.get('content-type')).toBe('application/x-tar');
    expect(tar.headers.get('content-disposition')).toBe('attachment; filename="plain-tar.tar"');
    expectSessionFiles(await tarEntries(tar.bytes));
    const zst = await download(http, profile.id, '?format=tar.zst');
    expect(unzstd(zst.bytes).equals(tar.bytes)).toBe(true);
    expect(zst.bytes.length).toBeLessThan(tar.bytes.length);
  });

  it('the zstd command itself also decodes the download, when it is installed', async () => {
    const profile = await savedProfile('cli-decoded');
    const zst = await download(http, profile.id);
    const cli = spawnSync('zstd', ['-d', '-c', '-q'], { input: zst.bytes, maxBuffer: 64 * 1024 * 1024 });
    if (cli.error) return; // the fzstd checks above are the independent ones
    expect(cli.status).toBe(0);
    expectSessionFiles(await tarEntries(cli.stdout));
  });

  it('a profile no session has saved downloads as an empty archive in either format, named by its id', async () => {
    const created = await http.post('/profiles', {});
    const id = created.body.id as string;
    const tar = await download(http, id, '?format=tar');
    expect(tar.status).toBe(200);
    expect(tar.headers.get('content-disposition')).toBe(`attachment; filename="${id}.tar"`);
    // Two zero blocks, the end-of-archive marker: what node-tar itself writes for no entries.
    expect(tar.bytes.equals(Buffer.alloc(1024))).toBe(true);
    const zst = await download(http, id);
    expect(zst.status).toBe(200);
    expect(unzstd(zst.bytes).equals(tar.bytes)).toBe(true);
  });

  it('serves what the latest save wrote', async () => {
    const profile = await savedProfile('resaved');
    const source = await mkdtemp(path.join(work, 'resave-'));
    await writeFile(path.join(source, 'only-now'), 'v2');
    await app.deps.profileStore.saveFrom({ orgId: app.tenant.orgId, projectId: app.tenant.defaultProjectId, profileId: profile.id }, source);
    const entries = await tarEntries(unzstd((await download(http, profile.id)).bytes));
    expect([...entries.keys()]).toEqual(['only-now']);
  });

  it.each(['zip', 'TAR', 'tar.gz', ''])('refuses format=%s with 400 naming query.format', async (format) => {
    const created = await http.post('/profiles', {});
    const res = await http.get(`/profiles/${created.body.id}/download?format=${format}`);
    expect(res.status).toBe(400);
    expect(errorFields(res)).toEqual(['query.format']);
  });

  it('answers 404 as JSON for an unknown profile', async () => {
    const res = await http.get('/profiles/nope/download');
    expect(res.status).toBe(404);
    expect(res.body.code).toBe('not_found');
  });

  it('another org and another project get 404, never the archive', async () => {
    const profile = await savedProfile('isolated');
    const other = await app.newTenant('other');
    expect((await download(other.http, profile.id)).status).toBe(404);
    expect((await download(other.http, profile.name, '?format=tar')).status).toBe(404);
    const project = await http.post('/org/projects', { name: 'elsewhere' });
    const scoped = http.withHeaders({ 'X-Kernel-Project-Id': project.body.id as string });
    expect((await download(scoped, profile.id)).status).toBe(404);
    expect((await download(scoped, profile.name, '?format=tar')).status).toBe(404);
  });

  it('without a zstd command, tar.zst fails with 500 zstd_unavailable while tar still works', async () => {
    const profile = await savedProfile('no-zstd');
    const saved = process.env.PATH;
    process.env.PATH = work;
    try {
      const res = await http.get(`/profiles/${profile.id}/download`);
      expect(res.status).toBe(500);
      expect(res.body.code).toBe('zstd_unavailable');
      expect(res.headers.get('x-should-retry')).toBe('false');
      expect((await download(http, profile.id, '?format=tar')).status).toBe(200);
    } finally {
      process.env.PATH = saved;
    }
  });
});
