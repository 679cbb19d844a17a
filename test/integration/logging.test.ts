import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CapturedLog } from '../support/captured-log.js';
import { startTestApp, type TestApp } from '../support/test-app.js';

describe('logging', () => {
  const captured = new CapturedLog();
  let app: TestApp;

  beforeAll(async () => {
    app = await startTestApp({ log: captured.logger() });
  });
  afterAll(async () => app?.close());

  it('never writes a plaintext key or an Authorization header to the log', async () => {
    const created = await app.tenant.http.post('/org/api_keys', { name: 'secret-check' });
    const rotated = await app.tenant.http.post(`/org/api_keys/${created.body.id}/rotate`, {});
    await app.client(created.body.key).get('/org/projects');
    await app.client('bp_wrong-key-that-does-not-exist-0000000000').get('/org/projects');
    expect(captured.lines.length).toBeGreaterThan(3);
    const all = captured.lines.join('\n');
    for (const secret of [app.tenant.adminKey, created.body.key, rotated.body.key, 'bp_wrong-key-that-does-not-exist']) {
      expect(all).not.toContain(secret);
    }
  });

  it('puts the request id on every line about a request', async () => {
    const before = captured.lines.length;
    const res = await app.tenant.http.get('/org/projects/nope', { 'x-request-id': 'trace-me-123' });
    expect(res.status).toBe(404);
    expect(res.headers.get('x-request-id')).toBe('trace-me-123');
    const lines = captured.entries().slice(before);
    expect(lines.length).toBeGreaterThan(0);
    for (const line of lines) expect(line.req?.id ?? line.requestId).toBe('trace-me-123');
  });

  it('logs the path of a request but never its query string', async () => {
    const before = captured.lines.length;
    await app.tenant.http.get('/org/api_keys?query=supersecretvalue');
    const lines = captured.lines.slice(before).join('\n');
    expect(lines).toContain('/org/api_keys');
    expect(lines).not.toContain('supersecretvalue');
  });
});
