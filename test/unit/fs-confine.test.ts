import { describe, expect, it } from 'vitest';
import { canonicalPath, isInside, parseMode, safeZipEntry, symbolicMode, toVirtual, virtualComponents } from '../../agent/src/fs/confine.js';

/** The pure path rules of the browser filesystem (agent/src/fs/confine.ts). */

describe('virtualComponents', () => {
  it('splits an absolute path and drops empty and "." parts', () => {
    expect(virtualComponents('/')).toEqual([]);
    expect(virtualComponents('/a//b/./c/')).toEqual(['a', 'b', 'c']);
  });

  it.each(['relative', '', 'a/../b', '/a/../../etc', '/..', '/a/..', '/nul\0byte'])('refuses %j', (input) => {
    expect(() => virtualComponents(input)).toThrow(expect.objectContaining({ status: 400, code: 'invalid_path' }));
  });

  it('refuses paths over 4096 bytes', () => {
    expect(() => virtualComponents(`/${'a'.repeat(5000)}`)).toThrow(/longer/);
  });

  it('refuses a component over 255 bytes as name_too_long, and takes one of 255', () => {
    expect(() => virtualComponents(`/a/${'n'.repeat(256)}/b`)).toThrow(expect.objectContaining({ status: 400, code: 'name_too_long' }));
    expect(() => virtualComponents(`/${'é'.repeat(128)}`)).toThrow(expect.objectContaining({ code: 'name_too_long' }));
    expect(virtualComponents(`/${'n'.repeat(255)}`)).toHaveLength(1);
  });

  it('canonicalises', () => {
    expect(canonicalPath('/a//b/')).toBe('/a/b');
    expect(canonicalPath('/')).toBe('/');
  });
});

describe('isInside and toVirtual', () => {
  it('accepts the root and paths below it, not siblings sharing a prefix', () => {
    expect(isInside('/w/home', '/w/home')).toBe(true);
    expect(isInside('/w/home', '/w/home/a')).toBe(true);
    expect(isInside('/w/home', '/w/homeless')).toBe(false);
    expect(isInside('/w/home', '/w')).toBe(false);
    expect(isInside('/w/home', '/etc/passwd')).toBe(false);
  });

  it('maps host paths back to the browser view', () => {
    expect(toVirtual('/w/home', '/w/home')).toBe('/');
    expect(toVirtual('/w/home', '/w/home/Downloads/x')).toBe('/Downloads/x');
    expect(toVirtual('/w/home', '/w/homeless/x')).toBeUndefined();
  });
});

describe('modes', () => {
  it('parses 3 and 4 octal digits, with a default', () => {
    expect(parseMode(undefined, 0o644)).toBe(0o644);
    expect(parseMode('755', 0)).toBe(0o755);
    expect(parseMode('0755', 0)).toBe(0o755);
    for (const bad of ['8', '77', '12345', 'rwx', '-644', ' 644']) expect(() => parseMode(bad, 0)).toThrow();
  });

  it.each(['4755', '2755', '6755', '1777', '7000'])('refuses the setuid, setgid and sticky bits of %s', (mode) => {
    expect(() => parseMode(mode, 0)).toThrow(expect.objectContaining({ status: 400, code: 'mode_not_allowed' }));
  });

  it('renders ls -l style', () => {
    expect(symbolicMode(0o100644)).toBe('-rw-r--r--');
    expect(symbolicMode(0o040755)).toBe('drwxr-xr-x');
    expect(symbolicMode(0o120777)).toBe('lrwxrwxrwx');
    expect(symbolicMode(0o104755)).toBe('-rwsr-xr-x');
    expect(symbolicMode(0o041777)).toBe('drwxrwxrwt');
    expect(symbolicMode(0o102644)).toBe('-rw-r-Sr--');
  });
});

describe('safeZipEntry (zip-slip)', () => {
  it('accepts relative names', () => {
    expect(safeZipEntry('a/b.txt')).toEqual(['a', 'b.txt']);
    expect(safeZipEntry('./dir/')).toEqual(['dir']);
  });

  it.each(['../evil', 'a/../../evil', '/etc/passwd', 'C:/windows', 'a\\..\\evil', '', './', 'nul\0'])('refuses %j', (name) => {
    expect(() => safeZipEntry(name)).toThrow(expect.objectContaining({ status: 400 }));
  });
});
