import { describe, expect, it } from 'vitest';
import { answerHeaders, mergeRequestHeaders } from '../../agent/src/curl/headers.js';
import { CURL_LIMITS, parseCurlRequest } from '../../agent/src/curl/request.js';

describe('curl request headers', () => {
  it("keep the browser's own headers and let a given one replace the browser's of the same name, in any case", () => {
    const merged = mergeRequestHeaders({ Cookie: 'jar=1', 'User-Agent': 'Chrome', Accept: 'text/html' }, { cookie: 'mine=1', 'X-Extra': 'x' });
    expect(merged).toEqual([
      { name: 'User-Agent', value: 'Chrome' },
      { name: 'Accept', value: 'text/html' },
      { name: 'cookie', value: 'mine=1' },
      { name: 'X-Extra', value: 'x' },
    ]);
  });
});

describe('curl answer headers', () => {
  it('split raw headers joined by newlines into arrays under lower-case names, leaving out HTTP/2 pseudo-headers', () => {
    const headers = answerHeaders({ 'Set-Cookie': 'a=1\nb=2', 'Content-Type': 'text/plain', ':status': '200' }, []);
    expect({ ...headers }).toEqual({ 'set-cookie': ['a=1', 'b=2'], 'content-type': ['text/plain'] });
  });

  it("use Fetch's list when the raw headers never came, repeated names together", () => {
    const headers = answerHeaders(undefined, [
      { name: 'X-Multi', value: '1' },
      { name: 'x-multi', value: '2' },
    ]);
    expect({ ...headers }).toEqual({ 'x-multi': ['1', '2'] });
  });

  it('drop Content-Encoding and Content-Length of a body Chromium decoded, and keep them for identity', () => {
    expect(Object.keys(answerHeaders({ 'Content-Encoding': 'gzip', 'Content-Length': '20', 'Content-Type': 'text/plain' }, []))).toEqual(['content-type']);
    expect(Object.keys(answerHeaders({ 'Content-Encoding': 'identity', 'Content-Length': '20' }, []))).toEqual(['content-encoding', 'content-length']);
  });

  it('take a header called __proto__ as a header', () => {
    const headers = answerHeaders(JSON.parse('{"__proto__": "x"}') as Record<string, string>, []);
    expect(Object.getOwnPropertyDescriptor(headers, '__proto__')?.value).toEqual(['x']);
    expect(JSON.stringify(headers)).toBe('{"__proto__":["x"]}');
  });
});

describe('parseCurlRequest', () => {
  it('fills in the defaults', () => {
    const parsed = parseCurlRequest({ url: 'https://Example.com' });
    expect(parsed).toEqual({ ok: true, request: { url: 'https://example.com/', method: 'GET', headers: {}, body: undefined, responseEncoding: 'utf8', timeoutMs: CURL_LIMITS.defaultTimeoutMs } });
  });

  it.each([
    [{ url: 'ftp://example.com/' }, 'body.url must be an http or https URL'],
    [{ url: 'javascript:alert(1)' }, 'body.url must be an http or https URL'],
    [{ url: 'https://example.com', headers: { Host: 'other' } }, 'body.headers.Host header Host is set by'],
    [{ url: 'https://example.com', headers: { 'proxy-authorization': 'x' } }, 'body.headers.proxy-authorization header proxy-authorization is refused'],
    [{ url: 'https://example.com', headers: { 'X-A': 'a\nb' } }, 'body.headers.X-A must not contain CR, LF or NUL'],
    [{ url: 'https://example.com', timeout_ms: CURL_LIMITS.maxTimeoutMs + 1 }, 'body.timeout_ms'],
    [{ url: 'https://example.com', extra: 1 }, 'Unrecognized key'],
  ])('refuses %j', (body, text) => {
    const parsed = parseCurlRequest(body);
    expect(parsed.ok).toBe(false);
    if (!parsed.ok) {
      expect(parsed.error.status).toBe(400);
      expect(parsed.error.message).toContain(text);
    }
  });
});
