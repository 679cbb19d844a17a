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
    // busboy reports this one twice (a bad part header, then the form's end): once crashed the extensions upload.
    ['a part with a malformed header', () => post('--xyz\r\nNone--xyz--\r\n', 'multipart/form-data; boundary=xyz'), 400, 'invalid_multipart'],
    ['a truncated part that is not the file', () => post('--xyz\r\ncontent-disposition: form-data; name="other"; filename="b.js"\r\n\r\nexport {}', 'multipart/form-data; boundary=xyz'), 400, 'invalid_multipart'],
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

/** A git source sent every way an SDK sends it; url /etc is a local repository, which these settings refuse. */
const LOCAL_SOURCE = { type: 'github', url: '/etc', ref: 'main', entrypoint: 'a.js', path: 'app', auth: { method: 'github_token', token: 't0k' } };

describe('POST /deployments as each SDK encodes it', () => {
  it('takes env vars as env_vars.KEY (Go SDK, kernel deploy -e) and env_vars[KEY] (TS and Python SDKs), and answers them redacted', async () => {
    const res = await post(form([['entrypoint_rel_path', 'index.js'], ['env_vars.FOO', 'bar'], ['env_vars[B]', 'x y'], ['file', new Blob(['export {}']), 'index.js'], ['force', 'false'], ['version', 'go-1']]));
    const body = (await res.json()) as { id: string; env_vars: Record<string, string> };
    expect(res.status).toBe(200);
    expect(body.env_vars).toEqual({ FOO: '', B: '' });
    const stored = await app.database.db.query<{ env_vars: Record<string, string> }>('SELECT env_vars FROM deployments WHERE id = $1', [body.id]);
    expect(stored.rows[0]!.env_vars).toEqual({ FOO: 'bar', B: 'x y' });
    const headers = { authorization: `Bearer ${app.tenant.adminKey}` };
    expect((await fetch(`${app.url}/deployments/${body.id}`, { method: 'DELETE', headers })).status).toBe(204);
    // kernel deploy logs sends since= empty when its flag is not given: absent, the whole log.
    const events = await fetch(`${app.url}/deployments/${body.id}/events?since=`, { headers });
    expect(events.status).toBe(200);
    const text = await events.text();
    expect(text).toContain('"status":"stopped"');
    expect(text).not.toContain('bar');
    expect((await fetch(`${app.url}/invocations?since=`, { headers })).status).toBe(200);
  });

  it.each([
    ['one JSON part (TS SDK, kernel deploy github)', [['source', JSON.stringify(LOCAL_SOURCE)]]],
    ['source[...] brackets (Python SDK)', [['source[type]', 'github'], ['source[url]', '/etc'], ['source[ref]', 'main'], ['source[entrypoint]', 'a.js'], ['source[path]', 'app'], ['source[auth][method]', 'github_token'], ['source[auth][token]', 't0k']]],
    ['source.x dots (Go SDK)', [['source.type', 'github'], ['source.url', '/etc'], ['source.ref', 'main'], ['source.entrypoint', 'a.js'], ['source.path', 'app'], ['source.auth.method', 'github_token'], ['source.auth.token', 't0k']]],
  ] as [string, [string, string][]][])('reads a source sent as %s (this local URL is then refused for what it is)', async (_label, parts) => {
    const res = await post(form([...parts, ['version', '1']]));
    const body = (await res.json()) as { code: string; message: string };
    expect([res.status, body.code]).toEqual([400, 'invalid_source']);
  });

  it.each([
    ['a bad env var name in dot form', [['env_vars.BAD-NAME', 'x']], 'body.env_vars.BAD-NAME'],
    ['the same env var in both forms', [['env_vars.A', '1'], ['env_vars[A]', '2']], undefined],
    ['a JSON source and source fields', [['source', JSON.stringify(LOCAL_SOURCE)], ['source[type]', 'github']], undefined],
    ['source fields that overlap', [['source[auth]', 'x'], ['source[auth][token]', 'y']], undefined],
    ['a source field sent twice', [['source.type', 'github'], ['source[type]', 'github']], undefined],
    ['an unknown source field', [['source[type]', 'github'], ['source[url]', 'https://example.test/a.git'], ['source[ref]', 'main'], ['source[entrypoint]', 'a.js'], ['source[shell]', 'rm -rf /']], undefined],
  ] as [string, [string, string][], string | undefined][])('refuses %s', async (_label, parts, field) => {
    const before = await deploymentRows();
    const res = await post(form([['file', new Blob(['a']), 'a.js'], ['entrypoint_rel_path', 'a.js'], ...parts]));
    const body = (await res.json()) as { code: string; details: { field?: string }[] };
    expect([res.status, body.code]).toEqual([400, 'invalid_request']);
    if (field) expect(body.details.map((detail) => detail.field)).toContain(field);
    expect(await deploymentRows()).toBe(before);
  });
});
