import { describe, expect, it } from 'vitest';
import { UploadPartNames } from '../../agent/src/fs/upload-parts.js';

/** The spellings of an upload's part names (agent/src/fs/upload-parts.ts): the SDKs' three, and what is refused. */

const read = (parts: Array<[string, boolean]>) => {
  const names = new UploadPartNames();
  return parts.map(([name, isFile]) => names.pairOf(name, isFile));
};

describe('UploadPartNames', () => {
  it('pairs the TS SDK spelling by index', () => {
    expect(read([['files[0][dest_path]', false], ['files[1][dest_path]', false], ['files[1][file]', true], ['files[0][file]', true]])).toEqual([
      { pair: '0', field: 'dest_path' },
      { pair: '1', field: 'dest_path' },
      { pair: '1', field: 'file' },
      { pair: '0', field: 'file' },
    ]);
  });

  it('pairs the Go SDK dotted spelling by index, leading zeros naming the same index', () => {
    expect(read([['files.0.dest_path', false], ['files.00.file', true], ['files.12.dest_path', false]])).toEqual([
      { pair: '0', field: 'dest_path' },
      { pair: '0', field: 'file' },
      { pair: '12', field: 'dest_path' },
    ]);
  });

  it('pairs the older Go SDK unindexed spelling by order of arrival', () => {
    expect(read([['files.dest_path', false], ['files.file', true], ['files.dest_path', false], ['files.file', true]])).toEqual([
      { pair: '#0', field: 'dest_path' },
      { pair: '#0', field: 'file' },
      { pair: '#1', field: 'dest_path' },
      { pair: '#1', field: 'file' },
    ]);
  });

  it('pairs the Python SDK spelling files[][dest_path] / files[][file] by order, fields before files', () => {
    expect(read([['files[][dest_path]', false], ['files[][dest_path]', false], ['files[][file]', true], ['files[][file]', true]])).toEqual([
      { pair: '#0', field: 'dest_path' },
      { pair: '#1', field: 'dest_path' },
      { pair: '#0', field: 'file' },
      { pair: '#1', field: 'file' },
    ]);
  });

  it('leaves parts not named files… to the caller', () => {
    expect(read([['dest_path', false], ['zip_file', true], ['filesystem', false]])).toEqual([undefined, undefined, undefined]);
  });

  it.each([
    ['files', false],
    ['files[]', true],
    ['files[0]', true],
    ['files[a][file]', true],
    ['files[0][mode]', false],
    ['files.0.1.file', true],
    ['files[1234567][file]', true],
    ['files.-1.file', true],
    ['files[0].file', true],
  ])('refuses the unknown spelling %j', (name, isFile) => {
    expect(() => read([[name, isFile]])).toThrow(expect.objectContaining({ status: 400, code: 'invalid_request' }));
  });

  it('refuses a request that mixes spellings', () => {
    expect(() => read([['files.0.dest_path', false], ['files[0][file]', true]])).toThrow(/spelled unlike/);
    expect(() => read([['files.dest_path', false], ['files.0.file', true]])).toThrow(/spelled unlike/);
    expect(() => read([['files[][dest_path]', false], ['files[0][file]', true]])).toThrow(/spelled unlike/);
  });

  it('refuses a file sent as a plain field and a dest_path sent as a file', () => {
    expect(() => read([['files[0][file]', false]])).toThrow(/must be a file part/);
    expect(() => read([['files.0.dest_path', true]])).toThrow(/must be a plain field/);
  });

  it('names a pair in the spelling the client used', () => {
    const dotted = new UploadPartNames();
    dotted.pairOf('files.3.file', true);
    expect(dotted.describe('3', 'dest_path')).toBe('files.3.dest_path');
    const unindexed = new UploadPartNames();
    unindexed.pairOf('files.file', true);
    expect(unindexed.describe('#0', 'dest_path')).toBe('files.dest_path #1');
    expect(new UploadPartNames().describe('2', 'file')).toBe('files[2][file]');
    const python = new UploadPartNames();
    python.pairOf('files[][file]', true);
    expect(python.describe('#1', 'dest_path')).toBe('files[][dest_path] #2');
  });
});
