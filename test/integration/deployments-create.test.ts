import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../support/test-app.js';

/**
 * POST /deployments with forms no SDK sends: each is a clear 4xx and stores nothing (the
 * happy paths, which build for real, are in test/e2e/deployments.sdk.test.ts).
 */

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
});
afterAll(async () => app?.close());

const post = (body: string | FormData, contentType?: string) =>
  fetch(`${app.url}/deployments`, {
    method: 'POST',
    headers: { authorization: `Bearer ${app.tenant.adminKey}`, ...(contentType ? { 'content-type': contentType } : {}) },
    body,
  });

const deploymentRows = async () => (await app.database.db.query<{ n: number }>('SELECT count(*)::int AS n FROM deployments')).rows[0]!.n;

const form = (parts: [string, string | Blob, string?][]) => {
  const data = new FormData();
  for (const [name, value, filename] of parts) {
    if (typeof value === 'string') data.append(name, value);
    else data.append(name, value, filename);
  }
  return data;
};

describe('POST /deployments with forms the SDK never sends', () => {
  it.each([
    ['a truncated multipart body', () => post('--xyz\r\ncontent-disposition: form-data; name="file"; filename="a.js"\r\n\r\nexport {}', 'multipart/form-data; boundary=xyz'), 400, 'invalid_multipart'],
    ['a text/plain body', () => post('hello', 'text/plain'), 415, 'unsupported_media_type'],
    ['two file parts', () => post(form([['file', new Blob(['a']), 'a.js'], ['file', new Blob(['b']), 'b.js'], ['entrypoint_rel_path', 'a.js']])), 400, 'invalid_request'],
    ['a field sent twice', () => post(form([['file', new Blob(['a']), 'a.js'], ['entrypoint_rel_path', 'a.js'], ['entrypoint_rel_path', 'b.js']])), 400, 'invalid_request'],
    ['an unknown field', () => post(form([['file', new Blob(['a']), 'a.js'], ['entrypoint_rel_path', 'a.js'], ['dest_path', '/tmp/x']])), 400, 'invalid_request'],
    ['force that is not true or false', () => post(form([['file', new Blob(['a']), 'a.js'], ['entrypoint_rel_path', 'a.js'], ['force', 'yes']])), 400, 'invalid_request'],
    ['a source that is not JSON', () => post(form([['source', '{not json']])), 400, 'invalid_request'],
    ['both a file and a source', () => post(form([['file', new Blob(['a']), 'a.js'], ['entrypoint_rel_path', 'a.js'], ['source', JSON.stringify({ type: 'github', url: 'https://example.test/a.git', ref: 'main', entrypoint: 'a.js' })]])), 400, 'invalid_request'],
    ['an empty file', () => post(form([['file', new Blob([]), 'a.js'], ['entrypoint_rel_path', 'a.js']])), 400, 'invalid_request'],
    ['an entrypoint leaving the source', () => post(form([['file', new Blob(['a']), 'a.js'], ['entrypoint_rel_path', '../a.js']])), 400, 'invalid_path'],
    ['a JSON body without a source', () => post(JSON.stringify({ version: '1' }), 'application/json'), 400, 'invalid_request'],
    ['a JSON git ref that is an option', () => post(JSON.stringify({ source: { type: 'github', url: 'https://example.test/a.git', ref: '--upload-pack=x', entrypoint: 'a.js' } }), 'application/json'), 400, 'invalid_request'],
    ['a local repository where none are allowed', () => post(JSON.stringify({ source: { type: 'github', url: '/etc', ref: 'main', entrypoint: 'a.js' } }), 'application/json'), 400, 'invalid_source'],
  ])('refuses %s', async (_label, send, status, code) => {
    const before = await deploymentRows();
    const res = await send();
    const body = (await res.json()) as { code: string; message: string; details: unknown[] };
    expect([res.status, body.code]).toEqual([status, code]);
    expect(body.message).toEqual(expect.any(String));
    expect(body.details).toEqual(expect.any(Array));
    expect(await deploymentRows()).toBe(before);
  });
});
