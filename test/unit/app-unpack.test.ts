import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import yazl from 'yazl';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AppError } from '../../api/src/http/errors.js';
import { checkGitUrl, SourceError } from '../../api/src/modules/apps/git-source.js';
import { extractZip, isZipFile, planZip, safeRelativePath } from '../../api/src/modules/apps/unpack.js';

/** Deployment zips and paths: what the create route refuses before anything is stored. */

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'bp-unpack-'));
});
afterAll(() => rm(dir, { recursive: true, force: true }));

const LIMITS = { maxUnpackedBytes: 1024 * 1024, maxFiles: 10 };

async function zipFile(build: (zip: yazl.ZipFile) => void, patch?: [string, string]): Promise<string> {
  const zip = new yazl.ZipFile();
  build(zip);
  zip.end();
  const chunks: Buffer[] = [];
  for await (const chunk of zip.outputStream) chunks.push(chunk as Buffer);
  let bytes = Buffer.concat(chunks);
  // yazl refuses unsafe names itself: they are patched into the bytes (same length).
  if (patch) bytes = Buffer.from(bytes.toString('latin1').replaceAll(patch[0], patch[1]), 'latin1');
  const file = path.join(dir, `z-${Math.random().toString(16).slice(2)}.zip`);
  await writeFile(file, bytes);
  return file;
}

const refusal = async (work: Promise<unknown>) => {
  const error = await work.then(() => undefined, (e: unknown) => e);
  expect(error).toBeInstanceOf(AppError);
  return error as AppError;
};

describe('safeRelativePath', () => {
  it('keeps plain relative paths and drops "." parts', () => {
    expect(safeRelativePath('src/./index.ts', 'x')).toEqual(['src', 'index.ts']);
  });
  it.each(['../x', 'a/../../x', '/etc/passwd', 'a\\..\\x', 'a\u0000b', '', './'])('refuses %j', (name) => {
    expect(() => safeRelativePath(name, 'entry')).toThrow(AppError);
  });
});

describe('planZip / extractZip', () => {
  it('extracts files and directories inside the target only', async () => {
    const file = await zipFile((zip) => {
      zip.addBuffer(Buffer.from('a'), 'src/index.js');
      zip.addEmptyDirectory('empty/');
    });
    expect(await isZipFile(file)).toBe(true);
    expect([...(await planZip(file, LIMITS)).files]).toEqual(['src/index.js']);
    const target = path.join(dir, 'out-ok');
    await mkdir(target);
    await extractZip(file, target, LIMITS);
    expect((await readdir(target)).sort()).toEqual(['empty', 'src']);
    expect(await readFile(path.join(target, 'src', 'index.js'), 'utf8')).toBe('a');
  });

  it('refuses a ../ entry before writing anything (zip-slip)', async () => {
    const file = await zipFile((zip) => zip.addBuffer(Buffer.from('pwned'), 'zz/slip.txt'), ['zz/slip.txt', '../slip.txt']);
    const target = path.join(dir, 'out-slip', 'inner');
    await mkdir(target, { recursive: true });
    expect((await refusal(extractZip(file, target, LIMITS))).code).toBe('invalid_path');
    expect(await readdir(path.dirname(target))).toEqual(['inner']);
    expect(await readdir(target)).toEqual([]);
  });

  it('refuses an absolute entry and a symlink entry', async () => {
    const absolute = await zipFile((zip) => zip.addBuffer(Buffer.from('x'), 'zetc/passwd'), ['zetc/passwd', '/etc/passwd']);
    expect((await refusal(planZip(absolute, LIMITS))).code).toBe('invalid_path');
    const link = await zipFile((zip) => zip.addBuffer(Buffer.from('/etc/shadow'), 'shadow', { mode: 0o120777 }));
    expect((await refusal(planZip(link, LIMITS))).code).toBe('invalid_zip');
  });

  it('refuses a zip that expands past the size limit, or holds too many entries (413)', async () => {
    const bomb = await zipFile((zip) => zip.addBuffer(Buffer.alloc(2 * 1024 * 1024), 'zeros.bin'));
    const tooBig = await refusal(planZip(bomb, LIMITS));
    expect([tooBig.status, tooBig.code]).toEqual([413, 'unpacked_too_large']);
    const many = await zipFile((zip) => {
      for (let i = 0; i < 11; i++) zip.addBuffer(Buffer.from('x'), `f${i}.js`);
    });
    const tooMany = await refusal(planZip(many, LIMITS));
    expect([tooMany.status, tooMany.code]).toEqual([413, 'too_many_files']);
  });

  it('refuses a file that is not a zip', async () => {
    const file = path.join(dir, 'not.zip');
    await writeFile(file, 'export {}');
    expect(await isZipFile(file)).toBe(false);
    expect((await refusal(planZip(file, LIMITS))).code).toBe('invalid_zip');
  });
});

describe('checkGitUrl', () => {
  it('takes http(s) URLs', () => {
    expect(() => checkGitUrl('https://github.com/a/b.git', false)).not.toThrow();
  });
  it.each(['ssh://git@github.com/a/b.git', 'git@github.com:a/b.git', 'ext::sh -c touch% /tmp/pwned', 'file:///srv/repo.git', '/srv/repo.git'])(
    'refuses %j unless local repositories are allowed (and then only local ones)',
    (url) => {
      expect(() => checkGitUrl(url, false)).toThrow(SourceError);
    },
  );
  it('takes a local repository where allowed', () => {
    expect(() => checkGitUrl('file:///srv/repo.git', true)).not.toThrow();
    expect(() => checkGitUrl('ext::sh -c id', true)).toThrow(SourceError);
  });
});
