import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FixedClock } from '../../api/src/clock.js';
import { connectionChannel } from '../../api/src/modules/auth-connections/service.js';
import type { HttpClient } from '../support/http.js';
import { openSse } from '../support/sse.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { connectionHelpers, unique } from './auth-connections.fixtures.js';

/** The event stream of managed auth connections: heartbeats, flow state changes and the end of the stream. */

describe('auth connections (no browser)', () => {
  let app: TestApp;
  let api: HttpClient;
  const clock = new FixedClock(new Date('2026-06-01T00:00:00Z'));

  beforeAll(async () => {
    // Event streams beat every 50 ms here (the heartbeat is a setting).
    app = await startTestApp({ clock, settings: { sseHeartbeatMs: 50 } });
    api = app.tenant.http;
  });
  afterAll(async () => app?.close());

  const { create, arrangeFlow, loginView } = connectionHelpers(() => app, clock);

  describe('event stream', () => {
    it('streams heartbeats only, then an error event and the end when the connection is deleted', async () => {
      const connection = await create(api, { domain: 'example.com', profile_name: unique('events') });
      const stream = await openSse<StreamedEvent>(`${app.url}/auth/connections/${connection.id}/events`, { key: app.tenant.adminKey });
      try {
        expect(stream.res.status).toBe(200);
        expect(stream.res.headers.get('content-type')).toMatch(/^text\/event-stream/);
        await stream.frame(3, 10_000);
        expect(stream.payloads.slice(0, 3).map((f) => f.event)).toEqual(['sse_heartbeat', 'sse_heartbeat', 'sse_heartbeat']);
        expect(stream.payloads[0]).toEqual({ event: 'sse_heartbeat', timestamp: expect.any(String) });

        expect((await api.delete(`/auth/connections/${connection.id}`)).status).toBe(204);
        await within(stream.ended, 10_000);
        const last = stream.payloads.at(-1)!;
        expect(last).toMatchObject({ event: 'error', error: { code: 'not_found' } });
        expect(stream.payloads.filter((f) => f.event === 'managed_auth_state')).toEqual([]);
      } finally {
        stream.abort();
      }
    });

    it('sends the running flow’s state, each change, and ends once the flow finishes', async () => {
      const connection = await create(api, { domain: 'example.com', profile_name: unique('events-flow') });
      const flowId = await arrangeFlow(connection, { status: 'IN_PROGRESS', step: 'AWAITING_INPUT', view: loginView });
      const stream = await openSse<StreamedEvent>(`${app.url}/auth/connections/${connection.id}/events`, { key: app.tenant.adminKey });
      try {
        const states = () => stream.payloads.filter((f) => f.event === 'managed_auth_state');
        await expect.poll(() => states().length, { timeout: 10_000, interval: 250 }).toBeGreaterThanOrEqual(1);
        expect(states()[0]).toEqual({
          event: 'managed_auth_state',
          flow_status: 'IN_PROGRESS',
          flow_step: 'AWAITING_INPUT',
          flow_type: 'LOGIN',
          hosted_url: `${app.url}/auth/hosted/${flowId}`,
          fields: loginView.fields,
          discovered_fields: loginView.discovered_fields,
          choices: loginView.choices,
          timestamp: expect.any(String),
        });
        // A notification without a change sends nothing new; a change is sent.
        await app.deps.events.publish(connectionChannel(connection.id), { id: connection.id });
        await app.database.db.query(`UPDATE auth_flows SET step = 'SUBMITTING' WHERE id = $1`, [flowId]);
        await app.deps.events.publish(connectionChannel(connection.id), { id: connection.id });
        await expect.poll(() => states().length, { timeout: 10_000, interval: 250 }).toBeGreaterThanOrEqual(2);
        await app.database.db.query(`UPDATE auth_flows SET status = 'SUCCESS', step = 'COMPLETED', post_login_url = 'https://example.com/home' WHERE id = $1`, [
          flowId,
        ]);
        await app.deps.events.publish(connectionChannel(connection.id), { id: connection.id });
        await within(stream.ended, 10_000);
        expect(states().map((f) => [f.flow_status, f.flow_step])).toEqual([
          ['IN_PROGRESS', 'AWAITING_INPUT'],
          ['IN_PROGRESS', 'SUBMITTING'],
          ['SUCCESS', 'COMPLETED'],
        ]);
        expect(states()[2]).toMatchObject({ post_login_url: 'https://example.com/home' });
        expect(states()[2]).not.toHaveProperty('hosted_url');
      } finally {
        stream.abort();
      }
    });

    it('ends a running flow’s stream with CANCELED when the connection is deleted', async () => {
      const connection = await create(api, { domain: 'example.com', profile_name: unique('events-cancel') });
      await arrangeFlow(connection, { status: 'IN_PROGRESS', step: 'DISCOVERING' });
      const stream = await openSse<StreamedEvent>(`${app.url}/auth/connections/${connection.id}/events`, { key: app.tenant.adminKey });
      try {
        await expect.poll(() => stream.payloads.some((f) => f.event === 'managed_auth_state'), { timeout: 10_000, interval: 250 }).toBe(true);
        expect((await api.delete(`/auth/connections/${connection.id}`)).status).toBe(204);
        await within(stream.ended, 10_000);
        expect(stream.payloads.filter((f) => f.event === 'managed_auth_state').map((f) => f.flow_status)).toEqual(['IN_PROGRESS', 'CANCELED']);
        expect(stream.payloads.at(-1)).toMatchObject({ flow_step: 'COMPLETED', error_code: 'flow_canceled' });
      } finally {
        stream.abort();
      }
    });

    it('answers the real route with 200 text/event-stream, and an unknown id with a JSON 404 before any header', async () => {
      const connection = await create(api, { domain: 'example.com', profile_name: unique('events-real') });
      const stream = await openSse<StreamedEvent>(`${app.url}/auth/connections/${connection.id}/events`, { key: app.tenant.adminKey });
      expect(stream.res.status).toBe(200);
      expect(stream.res.headers.get('content-type')).toMatch(/^text\/event-stream/);
      stream.abort();
      const missing = await fetch(`${app.url}/auth/connections/mauth_doesnotexist/events`, {
        headers: { authorization: `Bearer ${app.tenant.adminKey}`, accept: 'text/event-stream' },
      });
      expect(missing.status).toBe(404);
      expect(missing.headers.get('content-type')).toMatch(/^application\/json/);
      expect(((await missing.json()) as { code: string }).code).toBe('not_found');
    });
  });
});

const within = async <T>(promise: Promise<T>, ms: number): Promise<T> =>
  Promise.race([promise, new Promise<never>((_, reject) => setTimeout(() => reject(new Error(`not within ${ms} ms`)), ms))]);

/** What the connection event stream sends, one JSON object per frame. */
type StreamedEvent = { event: string; [k: string]: unknown };
