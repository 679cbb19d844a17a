import { mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { extractExtensionZip, inspectExtensionZip, parseManifest, zipOfCrx } from '../../lib/extension-zip.js';
import { crx3Of, markerManifest, markerZip, zipOf } from '../support/extension-zip.js';

/** The extension zip checks shared by the API (uploads) and the agent (unpacking). Writes only to a temp dir. */

const scratch = mkdtemp(path.join(os.tmpdir(), 'extension-zip-'));
afterAll(async () => rm(await scratch, { recursive: true, force: true }));

const refusal = async (zip: Buffer, limits = { maxUnpackedBytes: 1 << 20, maxEntries: 100 }) =>
  inspectExtensionZip(zip, limits).then(
    () => 'accepted',
    (error: { reason?: string }) => error.reason,
  );

describe('inspectExtensionZip', () => {
  it('reads the manifest at the root or in the one top folder', async () => {
    expect((await inspectExtensionZip(await markerZip())).manifest).toEqual({ name: 'page marker', version: '1.0.0', manifestVersion: 3 });
    expect((await inspectExtensionZip(await markerZip({ folder: 'marker' }))).prefix).toBe('marker');
  });

  it('refuses zip-slip, absolute paths, backslashes, symlinks and devices', async () => {
    const manifest = { name: 'manifest.json', data: JSON.stringify(markerManifest()) };
    expect(await refusal(await zipOf([manifest, { name: 'a/../../evil.js', data: 'x' }]))).toBe('unsafe_entry');
    expect(await refusal(await zipOf([manifest, { name: 'a\\..\\evil.js', data: 'x' }]))).toBe('unsafe_entry');
    expect(await refusal(await zipOf([manifest, { name: 'link', data: '/etc/passwd', mode: 0o120777 }]))).toBe('unsafe_entry');
    expect(await refusal(await zipOf([manifest, { name: 'fifo', data: '', mode: 0o010644 }]))).toBe('unsafe_entry');
  });

  it('refuses a zip without a manifest, with a broken one, or one that is not a zip', async () => {
    expect(await refusal(await zipOf([{ name: 'content.js', data: '' }]))).toBe('manifest_missing');
    expect(await refusal(await zipOf([{ name: 'a/manifest.json', data: '{}' }, { name: 'b/x.js', data: '' }]))).toBe('manifest_missing');
    expect(await refusal(await zipOf([{ name: 'manifest.json', data: '{not json' }]))).toBe('invalid_manifest');
    expect(await refusal(Buffer.from('PK but not really a zip'))).toBe('invalid_zip');
  });

  it('bounds the entry count and the unpacked size', async () => {
    const big = await zipOf([{ name: 'manifest.json', data: JSON.stringify(markerManifest()) }, { name: 'big.bin', data: Buffer.alloc(4096) }]);
    expect(await refusal(big, { maxUnpackedBytes: 1024, maxEntries: 100 })).toBe('too_large');
    expect(await refusal(big, { maxUnpackedBytes: 1 << 20, maxEntries: 1 })).toBe('too_large');
  });
});

describe('parseManifest', () => {
  it('wants manifest_version 2 or 3, a name and a version', () => {
    expect(() => parseManifest('{"manifest_version": 4, "name": "x", "version": "1"}')).toThrow(/manifest_version/);
    expect(() => parseManifest('{"manifest_version": 3, "version": "1"}')).toThrow(/name/);
    expect(() => parseManifest('{"manifest_version": 2, "name": "x"}')).toThrow(/version/);
    expect(parseManifest('\uFEFF{"manifest_version": 2, "name": "x", "version": "1"}').manifestVersion).toBe(2);
  });
});

describe('extractExtensionZip', () => {
  it('unpacks with the top folder stripped', async () => {
    const target = path.join(await scratch, 'marker');
    await extractExtensionZip(await markerZip({ folder: 'marker-1.0' }), target);
    expect((await readdir(target)).sort()).toEqual(['content.js', 'manifest.json']);
    expect(await readFile(path.join(target, 'content.js'), 'utf8')).toContain("dataset.ext = \"loaded\"");
  });
});

describe('zipOfCrx', () => {
  it('finds the zip inside a CRX3 and refuses anything else', async () => {
    const zip = await markerZip();
    expect(zipOfCrx(crx3Of(zip))?.equals(zip)).toBe(true);
    expect(zipOfCrx(zip)).toBeUndefined();
  });
});
