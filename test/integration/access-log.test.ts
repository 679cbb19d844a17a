import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CapturedLog } from '../support/captured-log.js';
import { eventually } from '../support/eventually.js';
import { startTestApp, type TestApp } from '../support/test-app.js';

describe('access log', () => {
  let app: TestApp;
  const captured = new CapturedLog();
  const accessLines = (requestId: string) => captured.entries().filter((line) => line.req?.id === requestId);

  beforeAll(async () => {
    app = await startTestApp({ log: captured.logger() });
  });
  afterAll(async () => app?.close());

  it('logs one info line per request: method, route pattern, status, duration, request id, project', async () => {
    const requestId = 'access-log-browsers-list';
    const res = await app.tenant.http.get('/browsers?limit=5', { 'X-Request-Id': requestId });
    expect(res.status).toBe(200);

    const [line, ...more] = await eventually(() => (accessLines(requestId).length > 0 ? accessLines(requestId) : undefined), { timeoutMs: 5000, intervalMs: 20, what: 'access line' });
    expect(more).toEqual([]);
    expect(line).toMatchObject({ level: 'info', route: '/browsers', projectId: app.tenant.defaultProjectId, req: { method: 'GET', path: '/browsers' }, res: { statusCode: 200 } });
    expect(line!.durationMs).toEqual(expect.any(Number));
    expect(line!.msg).toMatch(/^GET \/browsers 200 \d+ ms$/);
  });

  it('never logs a ?token= query string, headers or the body', async () => {
    const token = 'tok-never-logged-7c1e9a';
    const requestId = 'access-log-live-view';
    const res = await app.tenant.http.get(`/browsers/nonexistent-session/live?token=${token}`, { 'X-Request-Id': requestId });
    expect(res.status).toBeGreaterThanOrEqual(400);

    const [line] = await eventually(() => (accessLines(requestId).length > 0 ? accessLines(requestId) : undefined), { timeoutMs: 5000, intervalMs: 20, what: 'access line' });
    expect(line).toMatchObject({ level: 'info', req: { path: '/browsers/nonexistent-session/live' }, res: { statusCode: res.status } });
    expect(line!.route).not.toContain('?');
    expect(captured.text()).not.toContain(token);
    expect(captured.text()).not.toContain(app.tenant.adminKey);
  });
});
