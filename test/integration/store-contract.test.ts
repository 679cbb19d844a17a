/**
 * One contract for both profile and replay store adapters: the file stores and the S3
 * stores against a real S3-compatible server (moto's, test/support/moto.ts). No fakes.
 */
import { ListMultipartUploadsCommand, ListObjectsV2Command, ListPartsCommand } from '@aws-sdk/client-s3';
import { mkdir, mkdtemp, readFile, readdir, readlink, rm, stat, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ProfileRef, ProfileStore } from '../../api/src/ports/profile-store.js';
import { ReplayTooLargeError, type ReplayRef, type ReplayStore } from '../../api/src/ports/replay-store.js';
import { createFileProfileStore } from '../../api/src/storage/file-profile-store.js';
import { createFileReplayStore } from '../../api/src/storage/file-replay-store.js';
import { s3BucketOf } from '../../api/src/storage/s3-bucket.js';
import { createS3ProfileStore } from '../../api/src/storage/s3-profile-store.js';
import { createS3ReplayStore } from '../../api/src/storage/s3-replay-store.js';
import { startMoto, type Moto } from '../support/moto.js';

interface Stores {
  profiles: ProfileStore;
  replays: ReplayStore;
  /** Bytes of unfinished replay uploads the backend holds now (partial files, multipart parts). */
  uploadedSoFar(): Promise<number>;
  /** Every stored key or file, to show what a failed upload left behind. */
  listing(): Promise<string[]>;
}

let work: string;
let moto: Moto;
const MiB = 1024 * 1024;

beforeAll(async () => {
  work = await mkdtemp(path.join(os.tmpdir(), 'store-contract-'));
  moto = await startMoto();
}, 600_000);

afterAll(async () => {
  await moto?.stop();
  await rm(work, { recursive: true, force: true });
});

const makers: [string, () => Promise<Stores>][] = [
  [
    'file',
    async () => {
      const root = await mkdtemp(path.join(work, 'files-'));
      const list = async (dir: string) => (await readdir(dir, { recursive: true }).catch(() => [])).map(String);
      return {
        profiles: createFileProfileStore(path.join(root, 'profiles')),
        replays: createFileReplayStore(path.join(root, 'replays')),
        async uploadedSoFar() {
          let total = 0;
          for (const name of await list(path.join(root, 'replays'))) {
            if (name.endsWith('.partial')) total += (await stat(path.join(root, 'replays', name))).size;
          }
          return total;
        },
        listing: async () => (await list(path.join(root, 'replays'))).filter((n) => n.endsWith('.mp4') || n.endsWith('.partial')),
      };
    },
  ],
  [
    's3',
    () => {
      const prefix = `t${Math.random().toString(36).slice(2, 8)}/`;
      const bucket = s3BucketOf(moto.client, { bucket: moto.bucket, prefix });
      const Bucket = moto.bucket;
      return Promise.resolve({
        profiles: createS3ProfileStore(bucket),
        replays: createS3ReplayStore(bucket),
        async uploadedSoFar() {
          const uploads = await moto.client.send(new ListMultipartUploadsCommand({ Bucket, Prefix: prefix }));
          let total = 0;
          for (const upload of uploads.Uploads ?? []) {
            const parts = await moto.client.send(new ListPartsCommand({ Bucket, Key: upload.Key, UploadId: upload.UploadId }));
            for (const part of parts.Parts ?? []) total += part.Size ?? 0;
          }
          return total;
        },
        async listing() {
          const objects = await moto.client.send(new ListObjectsV2Command({ Bucket, Prefix: prefix }));
          const uploads = await moto.client.send(new ListMultipartUploadsCommand({ Bucket, Prefix: prefix }));
          return [...(objects.Contents ?? []).map((o) => o.Key!), ...(uploads.Uploads ?? []).map((u) => `upload:${u.Key!}`)];
        },
      });
    },
  ],
];

let counter = 0;
const profileRef = (): ProfileRef => ({ orgId: 'org_a', projectId: 'proj_a', profileId: `prof_${++counter}` });
const replayRef = (): ReplayRef => ({ orgId: 'org_a', projectId: 'proj_a', replayId: `rep_${++counter}` });

async function makeSource(marker: string): Promise<string> {
  const dir = await mkdtemp(path.join(work, 'src-'));
  await mkdir(path.join(dir, 'Default', 'Local Storage'), { recursive: true });
  await writeFile(path.join(dir, 'Default', 'Cookies'), `cookies ${marker}`);
  await writeFile(path.join(dir, 'Default', 'Local Storage', '000003.log'), `leveldb ${marker}`);
  await symlink('Default/Cookies', path.join(dir, 'cookies-link'));
  return dir;
}

async function readAll(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

/** `total` bytes, byte i = i mod 251, made as they are read. */
function pattern(total: number, onChunk?: (produced: number) => Promise<void>): Readable {
  return Readable.from(
    (async function* () {
      for (let produced = 0; produced < total; ) {
        const n = Math.min(MiB, total - produced);
        const out = Buffer.allocUnsafe(n);
        for (let i = 0; i < n; i++) out[i] = (produced + i) % 251;
        produced += n;
        await onChunk?.(produced);
        yield n === MiB ? out : out.subarray(0, n);
      }
    })(),
  );
}

describe.each(makers)('%s stores', (_name, make) => {
  let stores: Stores;
  beforeAll(async () => {
    stores = await make();
  });

  it('save, restore, export, replace and delete a profile', async () => {
    const ref = profileRef();
    expect(await stores.profiles.has(ref)).toBe(false);
    expect(await stores.profiles.restoreInto(ref, path.join(work, `none-${ref.profileId}`))).toBe(false);
    expect(await stores.profiles.exportTar(ref)).toBeUndefined();

    const { sizeBytes } = await stores.profiles.saveFrom(ref, await makeSource('one'));
    expect(sizeBytes).toBe('cookies one'.length + 'leveldb one'.length);
    expect(await stores.profiles.has(ref)).toBe(true);
    const target = path.join(work, `restore-${ref.profileId}`);
    expect(await stores.profiles.restoreInto(ref, target)).toBe(true);
    expect(await readFile(path.join(target, 'Default', 'Cookies'), 'utf8')).toBe('cookies one');
    expect(await readlink(path.join(target, 'cookies-link'))).toBe('Default/Cookies');
    expect((await readAll((await stores.profiles.exportTar(ref))!)).includes(Buffer.from('cookies one'))).toBe(true);

    const next = await mkdtemp(path.join(work, 'next-'));
    await writeFile(path.join(next, 'only'), 'new');
    await stores.profiles.saveFrom(ref, next);
    const replaced = path.join(work, `replaced-${ref.profileId}`);
    await stores.profiles.restoreInto(ref, replaced);
    expect(await readdir(replaced)).toEqual(['only']);

    await stores.profiles.delete(ref);
    expect(await stores.profiles.has(ref)).toBe(false);
    expect(await stores.profiles.exportTar(ref)).toBeUndefined();
    await expect(stores.profiles.delete(ref)).resolves.toBeUndefined();
  });

  it('an export started before a save reads the old profile whole', async () => {
    const ref = profileRef();
    await stores.profiles.saveFrom(ref, await makeSource('before'));
    const old = (await stores.profiles.exportTar(ref))!;
    await stores.profiles.saveFrom(ref, await makeSource('after'));
    const oldTar = await readAll(old);
    expect(oldTar.includes(Buffer.from('cookies before'))).toBe(true);
    expect(oldTar.includes(Buffer.from('cookies after'))).toBe(false);
    expect((await readAll((await stores.profiles.exportTar(ref))!)).includes(Buffer.from('cookies after'))).toBe(true);
  });

  it('a failed save keeps the previous profile', async () => {
    const ref = profileRef();
    await stores.profiles.saveFrom(ref, await makeSource('kept'));
    await expect(stores.profiles.saveFrom(ref, path.join(work, 'does-not-exist'))).rejects.toThrow();
    const target = path.join(work, `kept-${ref.profileId}`);
    await stores.profiles.restoreInto(ref, target);
    expect(await readFile(path.join(target, 'Default', 'Cookies'), 'utf8')).toBe('cookies kept');
  });

  it('refuses ids that are not plain tokens', async () => {
    const ref = { orgId: '..', projectId: 'proj_a', profileId: 'x' };
    await expect(stores.profiles.has(ref)).rejects.toThrow(/unsafe/);
    await expect(stores.profiles.exportTar(ref)).rejects.toThrow(/unsafe/);
    await expect(stores.replays.open({ orgId: 'org_a', projectId: 'a/b', replayId: 'r' })).rejects.toThrow(/unsafe/);
  });

  it('write, read, range-read and delete a replay; a missing one is undefined', async () => {
    const ref = replayRef();
    expect(await stores.replays.open(ref)).toBeUndefined();
    expect(await stores.replays.open(ref, { start: 0, end: 9 })).toBeUndefined();
    const body = Buffer.from('0123456789abcdefghij');
    expect(await stores.replays.save(ref, Readable.from([body.subarray(0, 7), body.subarray(7)]), 1000)).toEqual({ sizeBytes: 20 });
    const whole = (await stores.replays.open(ref))!;
    expect(whole.sizeBytes).toBe(20);
    expect((await readAll(whole.stream)).toString()).toBe('0123456789abcdefghij');
    const part = (await stores.replays.open(ref, { start: 5, end: 11 }))!;
    expect(part.sizeBytes).toBe(20);
    expect((await readAll(part.stream)).toString()).toBe('56789ab');
    await stores.replays.delete(ref);
    expect(await stores.replays.open(ref)).toBeUndefined();
    await expect(stores.replays.delete(ref)).resolves.toBeUndefined();
  });

  it('a replay over the limit is refused and nothing of it is kept, not even a previous video', async () => {
    const ref = replayRef();
    await expect(stores.replays.save(ref, pattern(3 * MiB), 2 * MiB)).rejects.toBeInstanceOf(ReplayTooLargeError);
    expect(await stores.replays.open(ref)).toBeUndefined();
    expect((await stores.listing()).filter((k) => k.includes(ref.replayId))).toEqual([]);
  });

  it('streams a 50 MiB replay both ways: parts reach the store before the body is read whole', async () => {
    const ref = replayRef();
    const total = 50 * MiB;
    let storedBeforeEnd = -1;
    const body = pattern(total, async (produced) => {
      if (produced === 45 * MiB) storedBeforeEnd = await stores.uploadedSoFar();
    });
    expect(await stores.replays.save(ref, body, 100 * MiB)).toEqual({ sizeBytes: total });
    // With 45 of 50 MiB read, at least a part is stored: the body was never held whole.
    expect(storedBeforeEnd).toBeGreaterThan(0);
    const tail = (await stores.replays.open(ref, { start: total - 1000, end: total - 1 }))!;
    const bytes = await readAll(tail.stream);
    expect(bytes.length).toBe(1000);
    expect(bytes.every((b, i) => b === (total - 1000 + i) % 251)).toBe(true);
    let read = 0;
    let chunks = 0;
    for await (const chunk of (await stores.replays.open(ref))!.stream) {
      read += (chunk as Buffer).length;
      chunks++;
    }
    expect(read).toBe(total);
    expect(chunks).toBeGreaterThan(1);
    await stores.replays.delete(ref);
  }, 120_000);
});
