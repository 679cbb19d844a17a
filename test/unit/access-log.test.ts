import { describe, expect, it } from 'vitest';
import { loggablePath } from '../../api/src/http/access-log.js';
import { resolveLogFormat } from '../../api/src/logger.js';

describe('loggablePath', () => {
  it.each([
    ['/browsers/abc/live?token=secret', '/browsers/abc/live'],
    ['/internal/browsers/abc/profile?token=secret&x=1', '/internal/browsers/abc/profile'],
    ['/browsers/abc/cdp#token=secret', '/browsers/abc/cdp'],
    ['/browsers?token=a?b', '/browsers'],
    ['/browsers', '/browsers'],
    [undefined, ''],
  ])('%s -> %s (no query string, where tokens travel)', (url, path) => {
    expect(loggablePath(url)).toBe(path);
  });
});

describe('resolveLogFormat', () => {
  it('auto is pretty on a terminal and JSON otherwise; json and pretty force either', () => {
    expect(resolveLogFormat('auto', true)).toBe('pretty');
    expect(resolveLogFormat('auto', false)).toBe('json');
    expect(resolveLogFormat('json', true)).toBe('json');
    expect(resolveLogFormat('pretty', false)).toBe('pretty');
  });
});
