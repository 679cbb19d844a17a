import { mkdir, mkdtemp, readFile, readdir, readlink, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { Parser, type ReadEntry } from 'tar';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ProfileRef, ProfileStore } from '../../api/src/ports/profile-store.js';
import { createFileProfileStore } from '../../api/src/storage/file-profile-store.js';

let work: string;
let root: string;
let store: ProfileStore;
let counter = 0;

beforeAll(async () => {
  work = await mkdtemp(path.join(os.tmpdir(), 'profile-store-test-'));
  root = path.join(work, 'store');
  store = createFileProfileStore(root);
});

afterAll(async () => {
  await rm(work, { recursive: true, force: true });
});

const newRef = (): ProfileRef => ({ orgId: 'org_a', projectId: 'proj_b', profileId: `prof_${++counter}` });

/** A user-data-dir-like tree: nested dirs, a relative and an absolute symlink, a dotfile, an `@` name. */
async function makeSource(marker: string): Promise<string> {
  const dir = await mkdtemp(path.join(work, 'src-'));
  await mkdir(path.join(dir, 'Default', 'Local Storage', 'leveldb'), { recursive: true });
  await writeFile(path.join(dir, 'Default', 'Cookies'), `cookies ${marker}`);
  await writeFile(path.join(dir, 'Default', 'Local Storage', 'leveldb', '000003.log'), `leveldb ${marker}`);
  await writeFile(path.join(dir, '.hidden'), 'dot');
  await writeFile(path.join(dir, '@not-an-archive'), 'at');
  await symlink('Default/Cookies', path.join(dir, 'cookies-link'));
  await symlink('/tmp/.org.chromium.Chromium.XYZ/SingletonSocket', path.join(dir, 'SingletonSocket'));
  return dir;
}

async function tarEntries(stream: Readable): Promise<Map<string, { type: string; body: string; linkpath: string }>> {
  const entries = new Map<string, { type: string; body: string; linkpath: string }>();
  const parser = new Parser();
  parser.on('entry', (entry: ReadEntry) => {
    const chunks: Buffer[] = [];
    entry.on('data', (c: Buffer) => chunks.push(c));
    entry.on('end', () =>
      entries.set(entry.path.replace(/\/$/, ''), {
        type: entry.type,
        body: Buffer.concat(chunks).toString(),
        linkpath: entry.linkpath ?? '',
      }),
    );
  });
  for await (const chunk of stream) parser.write(chunk as Buffer);
  await new Promise<void>((resolve) => parser.end(resolve));
  return entries;
}

describe('file profile store', () => {
  it('saveFrom then restoreInto round-trips files, nested dirs and symlinks verbatim', async () => {
    const ref = newRef();
    const source = await makeSource('one');
    const { sizeBytes } = await store.saveFrom(ref, source);
    expect(sizeBytes).toBe('cookies one'.length + 'leveldb one'.length + 'dot'.length + 'at'.length);

    const target = path.join(work, `restore-${ref.profileId}`);
    expect(await store.restoreInto(ref, target)).toBe(true);
    expect(await readFile(path.join(target, 'Default', 'Cookies'), 'utf8')).toBe('cookies one');
    expect(await readFile(path.join(target, 'Default', 'Local Storage', 'leveldb', '000003.log'), 'utf8')).toBe('leveldb one');
    expect(await readFile(path.join(target, '.hidden'), 'utf8')).toBe('dot');
    expect(await readlink(path.join(target, 'cookies-link'))).toBe('Default/Cookies');
    expect(await readlink(path.join(target, 'SingletonSocket'))).toBe('/tmp/.org.chromium.Chromium.XYZ/SingletonSocket');
    expect((await readdir(target)).sort()).toEqual(['.hidden', '@not-an-archive', 'Default', 'SingletonSocket', 'cookies-link']);
  });

  it('restoreInto and exportTar report nothing stored for a profile never saved', async () => {
    const ref = newRef();
    expect(await store.restoreInto(ref, path.join(work, 'never'))).toBe(false);
    expect(await store.exportTar(ref)).toBeUndefined();
  });

  it('exportTar lists the files relative to the profile root, links as links, `@` names as files', async () => {
    const ref = newRef();
    await store.saveFrom(ref, await makeSource('tar'));
    const entries = await tarEntries((await store.exportTar(ref))!);
    expect([...entries.keys()].sort()).toEqual([
      '.hidden',
      '@not-an-archive',
      'Default',
      'Default/Cookies',
      'Default/Local Storage',
      'Default/Local Storage/leveldb',
      'Default/Local Storage/leveldb/000003.log',
      'SingletonSocket',
      'cookies-link',
    ]);
    expect(entries.get('Default/Cookies')).toMatchObject({ type: 'File', body: 'cookies tar' });
    expect(entries.get('@not-an-archive')).toMatchObject({ type: 'File', body: 'at' });
    expect(entries.get('cookies-link')).toMatchObject({ type: 'SymbolicLink', linkpath: 'Default/Cookies' });
  });

  it('exports a profile saved from an empty directory as a valid empty tar', async () => {
    const ref = newRef();
    const empty = await mkdtemp(path.join(work, 'empty-'));
    expect(await store.saveFrom(ref, empty)).toEqual({ sizeBytes: 0 });
    const entries = await tarEntries((await store.exportTar(ref))!);
    expect(entries.size).toBe(0);
  });

  it('a save replaces the whole profile: files gone from the new source are gone', async () => {
    const ref = newRef();
    await store.saveFrom(ref, await makeSource('old'));
    const next = await mkdtemp(path.join(work, 'next-'));
    await writeFile(path.join(next, 'only'), 'new');
    await store.saveFrom(ref, next);
    const target = path.join(work, `replaced-${ref.profileId}`);
    await store.restoreInto(ref, target);
    expect(await readdir(target)).toEqual(['only']);
    // Nothing but the pointer and the live version remains on disk.
    expect((await readdir(path.join(root, ref.orgId, ref.projectId, ref.profileId))).length).toBe(2);
  });

  it('an export started before a save streams the old version whole, and the next export the new one', async () => {
    const ref = newRef();
    await store.saveFrom(ref, await makeSource('before'));
    const oldStream = (await store.exportTar(ref))!;
    await store.saveFrom(ref, await makeSource('after'));
    const oldEntries = await tarEntries(oldStream);
    const newEntries = await tarEntries((await store.exportTar(ref))!);
    expect(oldEntries.get('Default/Cookies')?.body).toBe('cookies before');
    expect(oldEntries.get('Default/Local Storage/leveldb/000003.log')?.body).toBe('leveldb before');
    expect(newEntries.get('Default/Cookies')?.body).toBe('cookies after');
    // Once the old reader is done, its version is removed.
    expect((await readdir(path.join(root, ref.orgId, ref.projectId, ref.profileId))).length).toBe(2);
  });

  it('readers during concurrent saves always see one complete version', async () => {
    const ref = newRef();
    await store.saveFrom(ref, await makeSource('0'));
    const sources = await Promise.all([1, 2, 3, 4].map((n) => makeSource(String(n))));
    const restores = [0, 1, 2, 3, 4, 5].map(async (n) => {
      const target = path.join(work, `concurrent-${ref.profileId}-${n}`);
      expect(await store.restoreInto(ref, target)).toBe(true);
      const cookies = await readFile(path.join(target, 'Default', 'Cookies'), 'utf8');
      const log = await readFile(path.join(target, 'Default', 'Local Storage', 'leveldb', '000003.log'), 'utf8');
      expect(cookies.replace('cookies ', '')).toBe(log.replace('leveldb ', ''));
    });
    await Promise.all([...sources.map((s) => store.saveFrom(ref, s)), ...restores]);
    const final = path.join(work, `concurrent-final-${ref.profileId}`);
    await store.restoreInto(ref, final);
    expect(await readFile(path.join(final, 'Default', 'Cookies'), 'utf8')).toBe('cookies 4');
  });

  it('skips sockets in the source instead of failing the save', async () => {
    const ref = newRef();
    const source = await mkdtemp(path.join(work, 'sock-'));
    await writeFile(path.join(source, 'file'), 'x');
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(path.join(source, 'live.sock'), resolve));
    try {
      await store.saveFrom(ref, source);
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
    const target = path.join(work, `sock-restore-${ref.profileId}`);
    await store.restoreInto(ref, target);
    expect(await readdir(target)).toEqual(['file']);
  });

  it('a failed save leaves the previous profile in place and no partial copy behind', async () => {
    const ref = newRef();
    await store.saveFrom(ref, await makeSource('kept'));
    await expect(store.saveFrom(ref, path.join(work, 'does-not-exist'))).rejects.toThrow();
    const target = path.join(work, `kept-${ref.profileId}`);
    await store.restoreInto(ref, target);
    expect(await readFile(path.join(target, 'Default', 'Cookies'), 'utf8')).toBe('cookies kept');
    expect((await readdir(path.join(root, ref.orgId, ref.projectId, ref.profileId))).length).toBe(2);
  });

  it('delete removes the stored profile and its directory, and succeeds when nothing is stored', async () => {
    const ref = newRef();
    await store.saveFrom(ref, await makeSource('gone'));
    await store.delete(ref);
    expect(await store.exportTar(ref)).toBeUndefined();
    expect(await store.restoreInto(ref, path.join(work, `deleted-${ref.profileId}`))).toBe(false);
    expect(await readdir(path.join(root, ref.orgId, ref.projectId))).not.toContain(ref.profileId);
    await expect(store.delete(ref)).resolves.toBeUndefined();
    await expect(store.delete(newRef())).resolves.toBeUndefined();
  });

  it('delete during an export lets the export finish, then removes the data', async () => {
    const ref = newRef();
    await store.saveFrom(ref, await makeSource('streaming'));
    const stream = (await store.exportTar(ref))!;
    await store.delete(ref);
    expect(await store.exportTar(ref)).toBeUndefined();
    expect((await tarEntries(stream)).get('Default/Cookies')?.body).toBe('cookies streaming');
    expect(await readdir(path.join(root, ref.orgId, ref.projectId))).toContain(ref.profileId);
    expect(await readdir(path.join(root, ref.orgId, ref.projectId, ref.profileId))).toEqual([]);
  });

  it.each([
    ['a parent segment', { orgId: '..', projectId: 'proj_b', profileId: 'prof_x' }],
    ['a slash', { orgId: 'org_a', projectId: 'proj_b/../..', profileId: 'prof_x' }],
    ['an absolute path', { orgId: 'org_a', projectId: 'proj_b', profileId: '/etc' }],
    ['an empty id', { orgId: 'org_a', projectId: '', profileId: 'prof_x' }],
    ['a dot', { orgId: 'org_a', projectId: 'proj_b', profileId: 'prof.x' }],
  ])('refuses ids with %s on every operation', async (_label, ref) => {
    const source = await mkdtemp(path.join(work, 'unsafe-'));
    await expect(store.saveFrom(ref, source)).rejects.toThrow(/unsafe profile path segment/);
    await expect(store.restoreInto(ref, path.join(work, 'unsafe-target'))).rejects.toThrow(/unsafe/);
    await expect(store.exportTar(ref)).rejects.toThrow(/unsafe/);
    await expect(store.delete(ref)).rejects.toThrow(/unsafe/);
    expect(await readdir(work)).not.toContain('etc');
  });
});

describe('the store directory', () => {
  it('is the service\'s alone (0700), even where it already existed with wider modes', async () => {
    const wide = path.join(work, 'wide-store');
    await mkdir(wide, { mode: 0o755 });
    const wideStore = createFileProfileStore(wide);
    await wideStore.saveFrom(newRef(), await makeSource('wide'));
    expect((await stat(wide)).mode & 0o777).toBe(0o700);
  });
});
