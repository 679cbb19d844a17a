import { link, mkdir, mkdtemp, readdir, readFile as readHostFile, rename, rm, stat, symlink, writeFile as writeHostFile } from 'node:fs/promises';
import { mkdirSync, renameSync, rmSync, symlinkSync, unlinkSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../api/src/clock.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { newProject } from './browsers.fixtures.js';
import { fsGet, fsPut, newFsSession, rawRequest, readFile, uploadZip, writeFile, zipOf, type FsSession } from './browser-fs.fixtures.js';

/**
 * Every way out of a browser's filesystem we know of, one test each: the API must refuse
 * (400 invalid_path) and nothing outside the browser's root may be read or changed.
 * Links are planted from the host side, as a compromised browser (which owns its files) could.
 */

let app: TestApp;
let fs: FsSession;
let outside: string;

beforeAll(async () => {
  app = await startTestApp({ clock: systemClock });
  const { http } = await newProject(app.tenant.http);
  fs = await newFsSession(app, http);
  outside = await mkdtemp(path.join(os.tmpdir(), 'bp-outside-'));
  await writeHostFile(path.join(outside, 'secret.txt'), 'secret');
});
afterAll(async () => {
  await app?.close();
  if (outside) await rm(outside, { recursive: true, force: true });
});

const host = (virtual: string) => path.join(fs.hostRoot, virtual);
const outsideUnchanged = async () => {
  expect((await readdir(outside)).sort()).toEqual(['secret.txt']);
  expect(await readHostFile(path.join(outside, 'secret.txt'), 'utf8')).toBe('secret');
};
const expectRefused = (res: { status: number; body: { code?: string } }) => {
  expect(res.status).toBe(400);
  expect(res.body.code).toBe('invalid_path');
};

describe('path escapes', () => {
  it('refuses ".." in any operation and writes nothing above the root', async () => {
    expectRefused(await writeFile(fs, '/../../../../../../tmp/bp-dotdot.txt', 'x'));
    expectRefused(await readFile(fs, '/../../../../../../etc/passwd'));
    expectRefused(await fsGet(fs, 'list_files', '/a/../..'));
    expectRefused(await fsPut(fs, 'move', { src_path: '/Downloads', dest_path: '/../../moved' }));
    await expect(stat('/tmp/bp-dotdot.txt')).rejects.toThrow();
  });

  it('refuses a symlink to /etc as a directory to read, list or write through', async () => {
    await symlink('/etc', host('etc-link'));
    expectRefused(await readFile(fs, '/etc-link/passwd'));
    expectRefused(await fsGet(fs, 'list_files', '/etc-link'));
    expectRefused(await fsGet(fs, 'file_info', '/etc-link/hostname'));
    expectRefused(await writeFile(fs, '/etc-link/bp-evil.txt', 'x'));
    expectRefused(await fsPut(fs, 'delete_file', { path: '/etc-link/hostname' }));
    await expect(stat('/etc/bp-evil.txt')).rejects.toThrow();
    await expect(stat('/etc/hostname')).resolves.toBeTruthy();
  });

  it('refuses a relative symlink that climbs out of the root', async () => {
    const depth = fs.hostRoot.split('/').length;
    await symlink(`${'../'.repeat(depth)}${outside.slice(1)}`, host('climb'));
    expectRefused(await readFile(fs, '/climb/secret.txt'));
    expectRefused(await writeFile(fs, '/climb/new.txt', 'x'));
    expectRefused(await fsPut(fs, 'create_directory', { path: '/climb/dir' }));
    await outsideUnchanged();
  });

  it('refuses a symlink with an absolute target outside as the file itself', async () => {
    await symlink(path.join(outside, 'secret.txt'), host('abs-link'));
    expectRefused(await readFile(fs, '/abs-link'));
    expectRefused(await fsGet(fs, 'file_info', '/abs-link'));
    expectRefused(await writeFile(fs, '/abs-link', 'overwritten'));
    expectRefused(await fsPut(fs, 'set_file_permissions', { path: '/abs-link', mode: '777' }));
    expect((await stat(path.join(outside, 'secret.txt'))).mode & 0o777).not.toBe(0o777);
    // Deleting the link removes the link, never its target.
    expect((await fsPut(fs, 'delete_file', { path: '/abs-link' })).status).toBe(204);
    await outsideUnchanged();
  });

  it('follows a symlink whose target stays inside the root (absolute or relative) for reading', async () => {
    await writeFile(fs, '/real/inside.txt', 'inside');
    await symlink(host('real'), host('inner-abs'));
    await symlink('real/inside.txt', host('inner-rel'));
    expect((await readFile(fs, '/inner-abs/inside.txt')).text).toBe('inside');
    expect((await readFile(fs, '/inner-rel')).text).toBe('inside');
    // Writing through a final symlink is refused even inside (O_NOFOLLOW).
    expectRefused(await writeFile(fs, '/inner-rel', 'x'));
  });

  it('refuses a hard link to a file outside for reading and writing', async () => {
    await link(path.join(outside, 'secret.txt'), host('hard'));
    try {
      expectRefused(await readFile(fs, '/hard'));
      expectRefused(await writeFile(fs, '/hard', 'overwritten'));
      expectRefused(await fsPut(fs, 'set_file_permissions', { path: '/hard', mode: '777' }));
      const zip = await rawRequest(fs.client, 'GET', `/browsers/${fs.id}/fs/download_dir_zip?path=/`);
      expect(zip.status).toBe(200);
      expect(zip.bytes.includes(Buffer.from('secret'))).toBe(false);
      await outsideUnchanged();
    } finally {
      await rm(host('hard'));
    }
  });

  it('leaves symlinks out of download_dir_zip', async () => {
    await mkdir(host('zipdir'));
    await writeHostFile(host('zipdir/ok.txt'), 'ok');
    await symlink(outside, host('zipdir/out'));
    await symlink(path.join(outside, 'secret.txt'), host('zipdir/out-file'));
    const zip = await rawRequest(fs.client, 'GET', `/browsers/${fs.id}/fs/download_dir_zip?path=/zipdir`);
    expect(zip.status).toBe(200);
    expect(zip.bytes.includes(Buffer.from('ok.txt'))).toBe(true);
    expect(zip.bytes.includes(Buffer.from('secret'))).toBe(false);
  });

  it('refuses a parent directory swapped for a symlink between check and use (race)', async () => {
    // A swapper flips /race/d between a real directory and a symlink to `outside` as
    // fast as it can while writes go through /race/d: every write lands inside or is
    // refused, none lands outside.
    mkdirSync(host('race'));
    const target = host('race/d');
    const parked = host('race/parked');
    mkdirSync(parked);
    let running = true;
    // The writes run in the agent, truly concurrent with this loop, so any step may find
    // what a write just re-created: each step tolerates that and the loop goes on.
    const attempt = (step: () => void) => {
      try {
        step();
      } catch {
        // lost a race with a write; the next step or turn recovers
      }
    };
    const tick = () => new Promise((resolve) => setImmediate(resolve));
    const swapper = (async () => {
      while (running) {
        attempt(() => rmSync(target, { recursive: true, force: true }));
        attempt(() => renameSync(parked, target));
        await tick();
        attempt(() => rmSync(parked, { recursive: true, force: true }));
        attempt(() => renameSync(target, parked));
        attempt(() => mkdirSync(parked, { recursive: true }));
        attempt(() => symlinkSync(outside, target));
        await tick();
        attempt(() => unlinkSync(target));
      }
    })();
    const statuses: number[] = [];
    for (let i = 0; i < 150; i++) statuses.push((await writeFile(fs, `/race/d/f${i}.txt`, 'race')).status);
    running = false;
    await swapper;
    rmSync(host('race'), { recursive: true, force: true });
    expect(statuses.filter((status) => ![204, 400, 404].includes(status))).toEqual([]);
    await outsideUnchanged();
  });

  it('refuses a zip with a zip-slip entry and writes none of its entries', async () => {
    const good = await zipOf({ 'good.txt': 'g', 'xx/evil.txt': 'e' });
    const slip = Buffer.from(good.toString('latin1').replaceAll('xx/evil.txt', '../evil.txt'), 'latin1');
    const res = await uploadZip(fs, '/slip', slip);
    expectRefused(res);
    expect(res.body.message ?? res.text).toMatch(/\.\./);
    await expect(stat(host('slip'))).rejects.toThrow();
    await expect(stat(host('evil.txt'))).rejects.toThrow();
    const absolute = Buffer.from(good.toString('latin1').replaceAll('xx/evil.txt', '/tmp/evil1'), 'latin1');
    expectRefused(await uploadZip(fs, '/slip', absolute));
    await expect(stat('/tmp/evil1')).rejects.toThrow();
  });

  it('refuses a zip extracted through a symlinked destination', async () => {
    await rename(host('climb'), host('climb2')).catch(() => undefined);
    await symlink(outside, host('zip-out'));
    expectRefused(await uploadZip(fs, '/zip-out', await zipOf({ 'x.txt': 'x' })));
    await outsideUnchanged();
  });
});
