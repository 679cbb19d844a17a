import type Kernel from '@onkernel/sdk';
import { BadRequestError, NotFoundError, toFile } from '@onkernel/sdk';
import yauzl from 'yauzl';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rejection } from './support/sdk.js';
import { cleanupServices, startService, type RunningService } from '../support/service.js';

/** The browser filesystem through the SDK, against the built service with real Chromium. */

let service: RunningService;
let admin: Kernel;

beforeAll(async () => {
  service = await startService();
  admin = service.client();
});
afterAll(async () => {
  await cleanupServices();
});

const zipNames = (bytes: Buffer) =>
  new Promise<string[]>((resolve, reject) =>
    yauzl.fromBuffer(bytes, { lazyEntries: true }, (error, zip) => {
      if (error) return reject(error);
      const names: string[] = [];
      zip.on('entry', (entry: yauzl.Entry) => {
        names.push(entry.fileName);
        zip.readEntry();
      });
      zip.on('end', () => resolve(names.sort()));
      zip.readEntry();
    }),
  );

describe('browsers.fs through the SDK', () => {
  it('writes, describes, reads, lists, uploads and zips files of a session', async () => {
    const session = await admin.browsers.create({ headless: true, timeout_seconds: 120 });
    const id = session.session_id;
    try {
      await admin.browsers.fs.writeFile(id, 'hello from the sdk', { path: '/sdk/hello.txt' });
      const info = await admin.browsers.fs.fileInfo(id, { path: '/sdk/hello.txt' });
      expect(info).toMatchObject({ name: 'hello.txt', path: '/sdk/hello.txt', is_dir: false, size_bytes: 18, mode: '-rw-r--r--' });
      const read = await admin.browsers.fs.readFile(id, { path: '/sdk/hello.txt' });
      expect(await read.text()).toBe('hello from the sdk');

      await admin.browsers.fs.upload(id, {
        files: [
          { dest_path: '/sdk/up/a.txt', file: await toFile(Buffer.from('A'), 'a.txt') },
          { dest_path: '/sdk/up/b.txt', file: await toFile(Buffer.from('BB'), 'b.txt') },
        ],
      });
      const listed = await admin.browsers.fs.listFiles(id, { path: '/sdk/up' });
      expect(listed.map((f) => [f.name, f.size_bytes])).toEqual([
        ['a.txt', 1],
        ['b.txt', 2],
      ]);

      const zip = await admin.browsers.fs.downloadDirZip(id, { path: '/sdk' });
      expect(await zipNames(Buffer.from(await zip.arrayBuffer()))).toEqual(['hello.txt', 'up/a.txt', 'up/b.txt']);

      await admin.browsers.fs.createDirectory(id, { path: '/sdk/made' });
      await admin.browsers.fs.move(id, { src_path: '/sdk/hello.txt', dest_path: '/sdk/made/moved.txt' });
      await admin.browsers.fs.setFilePermissions(id, { path: '/sdk/made/moved.txt', mode: '600' });
      expect((await admin.browsers.fs.fileInfo(id, { path: '/sdk/made/moved.txt' })).mode).toBe('-rw-------');
      await admin.browsers.fs.deleteFile(id, { path: '/sdk/made/moved.txt' });
      await admin.browsers.fs.deleteDirectory(id, { path: '/sdk' });

      await rejection(admin.browsers.fs.fileInfo(id, { path: '/sdk' }), NotFoundError);
      await rejection(admin.browsers.fs.readFile(id, { path: '/../etc/passwd' }), BadRequestError);
      await rejection(admin.browsers.fs.writeFile(id, 'x', { path: '/x.txt', mode: '999' }), BadRequestError);
    } finally {
      await admin.browsers.deleteByID(id);
    }
  }, 60_000);
});
