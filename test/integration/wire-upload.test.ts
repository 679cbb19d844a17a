import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../api/src/clock.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { newProject } from './browsers.fixtures.js';
import { fsGet, newFsSession, rawRequest, readFile, type FsSession } from './browser-fs.fixtures.js';

/**
 * POST /browsers/{id}/fs/upload with the part names each SDK sends (docs/wire-compatibility.md),
 * as raw multipart bodies written by hand so the exact bytes are the ones under test, against a
 * real browser session through the API. Bad forms are refused with 400 and write nothing.
 */

interface Part {
  name: string;
  value: string;
  /** A file part: sent with a filename and application/octet-stream. */
  file?: boolean;
}

/** Files one upload may hold (AGENT_FS_ZIP_MAX_ENTRIES, default 10,000), small here. */
const MAX_FILES = 4;

let app: TestApp;
let fs: FsSession;
let seq = 0;

beforeAll(async () => {
  app = await startTestApp({ clock: systemClock, agentFsEnv: { AGENT_FS_ZIP_MAX_ENTRIES: String(MAX_FILES) } });
  const { http } = await newProject(app.tenant.http);
  fs = await newFsSession(app, http);
});
afterAll(async () => {
  await app?.close();
});

function multipart(parts: Part[]): { body: string; contentType: string } {
  const boundary = `wire-${randomBytes(8).toString('hex')}`;
  const body =
    parts
      .map(({ name, value, file }) =>
        file
          ? `--${boundary}\r\nContent-Disposition: form-data; name="${name}"; filename="anonymous_file"\r\nContent-Type: application/octet-stream\r\n\r\n${value}\r\n`
          : `--${boundary}\r\nContent-Disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`,
      )
      .join('') + `--${boundary}--\r\n`;
  return { body, contentType: `multipart/form-data; boundary=${boundary}` };
}

async function upload(parts: Part[]) {
  const { body, contentType } = multipart(parts);
  return rawRequest(fs.client, 'POST', `/browsers/${fs.id}/fs/upload`, body, { 'content-type': contentType });
}

/** A directory of its own under "/" for each case, so "nothing written" is a plain listing. */
const freshDir = () => `/wire-${++seq}`;

async function listing(dir: string): Promise<string[] | 'absent'> {
  const res = await fsGet(fs, 'list_files', dir);
  if (res.status === 404) return 'absent';
  expect(res.status, res.text).toBe(200);
  return (res.body as Array<{ name: string }>).map((entry) => entry.name).sort();
}

describe('upload part names', () => {
  it('takes the TS SDK spelling files[i][dest_path] / files[i][file]', async () => {
    const dir = freshDir();
    const res = await upload([
      { name: 'files[0][dest_path]', value: `${dir}/a.txt` },
      { name: 'files[0][file]', value: 'alpha', file: true },
      { name: 'files[1][dest_path]', value: `${dir}/b.txt` },
      { name: 'files[1][file]', value: 'beta', file: true },
    ]);
    expect(res.status, res.text).toBe(204);
    expect((await readFile(fs, `${dir}/a.txt`)).text).toBe('alpha');
    expect((await readFile(fs, `${dir}/b.txt`)).text).toBe('beta');
  });

  it('takes the Go SDK spelling files.i.dest_path / files.i.file, in any order', async () => {
    const dir = freshDir();
    const res = await upload([
      { name: 'files.1.file', value: 'second', file: true },
      { name: 'files.0.dest_path', value: `${dir}/zero.txt` },
      { name: 'files.0.file', value: 'first', file: true },
      { name: 'files.1.dest_path', value: `${dir}/one.txt` },
    ]);
    expect(res.status, res.text).toBe(204);
    expect((await readFile(fs, `${dir}/zero.txt`)).text).toBe('first');
    expect((await readFile(fs, `${dir}/one.txt`)).text).toBe('second');
  });

  it('takes the older Go SDK spelling files.dest_path / files.file, paired in order', async () => {
    const dir = freshDir();
    const res = await upload([
      { name: 'files.dest_path', value: `${dir}/first.txt` },
      { name: 'files.file', value: 'one', file: true },
      { name: 'files.dest_path', value: `${dir}/second.txt` },
      { name: 'files.file', value: 'two', file: true },
    ]);
    expect(res.status, res.text).toBe(204);
    expect((await readFile(fs, `${dir}/first.txt`)).text).toBe('one');
    expect((await readFile(fs, `${dir}/second.txt`)).text).toBe('two');
  });

  it('takes the Python SDK spelling files[][dest_path] / files[][file], fields first, paired in order', async () => {
    const dir = freshDir();
    const res = await upload([
      { name: 'files[][dest_path]', value: `${dir}/p1.txt` },
      { name: 'files[][dest_path]', value: `${dir}/p2.txt` },
      { name: 'files[][file]', value: 'py one', file: true },
      { name: 'files[][file]', value: 'py two', file: true },
    ]);
    expect(res.status, res.text).toBe(204);
    expect((await readFile(fs, `${dir}/p1.txt`)).text).toBe('py one');
    expect((await readFile(fs, `${dir}/p2.txt`)).text).toBe('py two');
  });

  it('ignores parts that are not upload parts', async () => {
    const dir = freshDir();
    const res = await upload([
      { name: 'note', value: 'extra' },
      { name: 'files[0][dest_path]', value: `${dir}/kept.txt` },
      { name: 'files[0][file]', value: 'kept', file: true },
    ]);
    expect(res.status, res.text).toBe(204);
    expect(await listing(dir)).toEqual(['kept.txt']);
  });
});

describe('bad upload forms are refused and write nothing', () => {
  const cases: Array<[string, (dir: string) => Part[], RegExp]> = [
    ['an unknown spelling', (dir) => [{ name: 'files[0][path]', value: `${dir}/x` }, { name: 'files[0][file]', value: 'x', file: true }], /unrecognized upload part/],
    [
      'a second pair spelled unlike the first',
      (dir) => [
        { name: 'files.0.dest_path', value: `${dir}/a` },
        { name: 'files.0.file', value: 'a', file: true },
        { name: 'files[1][dest_path]', value: `${dir}/b` },
        { name: 'files[1][file]', value: 'b', file: true },
      ],
      /spelled unlike/,
    ],
    [
      'a file without its dest_path after a complete pair',
      (dir) => [
        { name: 'files[0][dest_path]', value: `${dir}/a` },
        { name: 'files[0][file]', value: 'a', file: true },
        { name: 'files[1][file]', value: 'b', file: true },
      ],
      /files\[1\]\[dest_path\] is missing/,
    ],
    [
      'a dest_path without its file',
      (dir) => [
        { name: 'files.dest_path', value: `${dir}/a` },
        { name: 'files.file', value: 'a', file: true },
        { name: 'files.dest_path', value: `${dir}/b` },
      ],
      /files\.file #2 is missing/,
    ],
    [
      'a dest_path sent twice',
      (dir) => [
        { name: 'files[0][dest_path]', value: `${dir}/a` },
        { name: 'files[0][dest_path]', value: `${dir}/b` },
        { name: 'files[0][file]', value: 'a', file: true },
      ],
      /sent twice/,
    ],
    ['a file sent as a plain field', (dir) => [{ name: 'files[0][dest_path]', value: `${dir}/a` }, { name: 'files[0][file]', value: 'a' }], /must be a file part/],
    ['no upload part at all', (dir) => [{ name: 'dest_path', value: `${dir}/a` }, { name: 'file', value: 'a', file: true }], /no upload parts/],
    [
      'a relative dest_path after a good pair',
      (dir) => [
        { name: 'files.0.dest_path', value: `${dir}/a` },
        { name: 'files.0.file', value: 'a', file: true },
        { name: 'files.1.dest_path', value: 'relative/b' },
        { name: 'files.1.file', value: 'b', file: true },
      ],
      /.+/,
    ],
  ];

  it.each(cases)('%s', async (_, parts, message) => {
    const dir = freshDir();
    const res = await upload(parts(dir));
    expect(res.status, res.text).toBe(400);
    expect(res.body).toMatchObject({ code: expect.stringMatching(/^invalid_(request|path)$/), message: expect.stringMatching(message) });
    expect(await listing(dir)).toBe('absent');
  });
});

describe('the number of files in one upload', () => {
  const parts = (dir: string, count: number): Part[] =>
    Array.from({ length: count }, (_, i) => [
      { name: `files.${i}.dest_path`, value: `${dir}/${i}.txt` },
      { name: `files.${i}.file`, value: String(i), file: true },
    ]).flat();

  it(`takes ${MAX_FILES} files`, async () => {
    const dir = freshDir();
    const res = await upload(parts(dir, MAX_FILES));
    expect(res.status, res.text).toBe(204);
    expect(await listing(dir)).toHaveLength(MAX_FILES);
  });

  it(`refuses ${MAX_FILES + 1} with 413 too_many_files and writes none`, async () => {
    const dir = freshDir();
    const res = await upload(parts(dir, MAX_FILES + 1));
    expect(res.status, res.text).toBe(413);
    expect(res.body).toMatchObject({ code: 'too_many_files' });
    expect(await listing(dir)).toBe('absent');
  });
});
