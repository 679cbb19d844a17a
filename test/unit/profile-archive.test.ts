import { mkdir, mkdtemp, readdir, readFile, rm, stat, symlink, writeFile } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { entryViolation, extractArchive, isExcludedFromProfile, packProfile, UnsafeArchiveError } from '../../lib/profile-archive.js';
import { rawTar } from '../support/raw-tar.js';

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'profile-archive-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

const LIMITS = { maxArchiveBytes: 1024 * 1024, maxContentBytes: 1024 * 1024, maxEntries: 100 };

async function refusal(promise: Promise<unknown>): Promise<UnsafeArchiveError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(UnsafeArchiveError);
  return error as UnsafeArchiveError;
}

describe('entryViolation', () => {
  it.each([
    ['a plain file', { path: 'Default/Cookies', type: 'File' }, undefined],
    ['a directory', { path: 'Default/', type: 'Directory' }, undefined],
    ['a symlink inside', { path: 'Default/a', type: 'SymbolicLink', linkpath: '../Local State' }, undefined],
    ['an absolute path', { path: '/etc/passwd', type: 'File' }, /absolute path/],
    ['a .. segment', { path: 'a/../../b', type: 'File' }, /contains "\.\."/],
    ['a backslash', { path: 'a\\..\\b', type: 'File' }, /backslash/],
    ['a symlink out', { path: 'a/b', type: 'SymbolicLink', linkpath: '../../x' }, /outside the profile/],
    ['an absolute symlink', { path: 'a', type: 'SymbolicLink', linkpath: '/etc' }, /absolute path/],
    ['an empty symlink', { path: 'a', type: 'SymbolicLink', linkpath: '' }, /empty or invalid/],
    ['a hard link', { path: 'a', type: 'Link', linkpath: 'b' }, /is a Link/],
    ['a device', { path: 'a', type: 'CharacterDevice' }, /is a CharacterDevice/],
  ])('%s', (_what, entry, expected) => {
    const problem = entryViolation(entry);
    if (expected === undefined) expect(problem).toBeUndefined();
    else expect(problem).toMatch(expected);
  });
});

describe('extractArchive', () => {
  it('unpacks a well-formed archive and reports what it wrote', async () => {
    const result = await extractArchive(Readable.from([rawTar([{ path: 'Default/', type: 'Directory' }, { path: 'Default/Preferences', body: '{}' }])]), dir, LIMITS);
    expect(result).toEqual({ entries: 2, bytes: 2 });
    expect(await readFile(path.join(dir, 'Default/Preferences'), 'utf8')).toBe('{}');
  });

  it('refuses more entries, more content or a longer archive than the limits allow', async () => {
    const many = rawTar(Array.from({ length: 5 }, (_, i) => ({ path: `f${i}`, body: 'x' })));
    expect((await refusal(extractArchive(Readable.from([many]), dir, { ...LIMITS, maxEntries: 4 }))).reason).toBe('too_large');
    const big = rawTar([{ path: 'big', body: 'x'.repeat(5000) }]);
    expect((await refusal(extractArchive(Readable.from([big]), dir, { ...LIMITS, maxContentBytes: 4000 }))).reason).toBe('too_large');
    expect((await refusal(extractArchive(Readable.from([big]), dir, { ...LIMITS, maxArchiveBytes: 2048 }))).reason).toBe('too_large');
  });

  it('writes no refused entry, and clears setuid bits from the ones it writes', async () => {
    const error = await refusal(extractArchive(Readable.from([rawTar([{ path: '../outside', body: 'x' }])]), dir, LIMITS));
    expect(error.reason).toBe('unsafe_entry');
    expect(await readdir(path.dirname(dir))).not.toContain('outside');
    await extractArchive(Readable.from([rawTar([{ path: 'tool', body: '#!/bin/sh', mode: 0o4755 }])]), dir, LIMITS);
    expect((await stat(path.join(dir, 'tool'))).mode & 0o7777).toBe(0o755);
  });
});

describe('packProfile', () => {
  it('leaves caches, singleton files, lock files and sockets out, and keeps the rest', async () => {
    const userData = path.join(dir, 'user-data');
    await mkdir(path.join(userData, 'Default', 'Cache', 'Cache_Data'), { recursive: true });
    await mkdir(path.join(userData, 'Default', 'Local Storage', 'leveldb'), { recursive: true });
    await writeFile(path.join(userData, 'Default', 'Cache', 'Cache_Data', 'index'), 'cache');
    await writeFile(path.join(userData, 'Default', 'Local Storage', 'leveldb', 'CURRENT'), 'MANIFEST-1');
    await writeFile(path.join(userData, 'Default', 'Local Storage', 'leveldb', 'LOCK'), '');
    await writeFile(path.join(userData, 'Default', 'Cookies'), 'cookies');
    await writeFile(path.join(userData, 'DevToolsActivePort'), '1234');
    await symlink('host-123', path.join(userData, 'SingletonLock'));
    const socket = net.createServer().listen(path.join(userData, 'a.sock'));
    await new Promise((resolve) => socket.once('listening', resolve));
    try {
      const out = path.join(dir, 'out');
      await mkdir(out);
      await extractArchive(await packProfile(userData), out, LIMITS);
      const files = (await readdir(out, { recursive: true })).sort();
      expect(files).toEqual(['Default', 'Default/Cookies', 'Default/Local Storage', 'Default/Local Storage/leveldb', 'Default/Local Storage/leveldb/CURRENT']);
      expect(isExcludedFromProfile('Profile 1/Code Cache/js/index')).toBe(true);
    } finally {
      socket.close();
    }
  });
});
