import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FixedClock } from '../../api/src/clock.js';
import { errorFields, type HttpClient } from '../support/http.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { connectionHelpers, unique } from './auth-connections.fixtures.js';

/** The flow endpoints of managed auth connections without a browser: no flow yet, and flows arranged in the database as the driver writes them. */

describe('auth connections (no browser)', () => {
  let app: TestApp;
  let api: HttpClient;
  const clock = new FixedClock(new Date('2026-06-01T00:00:00Z'));

  beforeAll(async () => {
    app = await startTestApp({ clock });
    api = app.tenant.http;
  });
  afterAll(async () => app?.close());

  const { create, idsIn, expectError, arrangeFlow, loginView } = connectionHelpers(() => app, clock);

  describe('flow endpoints with no flow', () => {
    it('refuses a submission with 409 flow_not_running when no flow runs', async () => {
      const connection = await create(api, { domain: 'example.com', profile_name: unique('submit') });
      const res = await api.post(`/auth/connections/${connection.id}/submit`, { field_values: { username: 'u' } });
      expectError(res, 409, 'flow_not_running');
      expectError(await api.post('/auth/connections/mauth_doesnotexist/submit', { field_values: { a: 'b' } }), 404, 'not_found');
    });

    it.each([
      ['sso_button_selector with sso_provider', { sso_button_selector: '//button', sso_provider: 'google' }, 'body.sso_provider'],
      ['an unknown field', { password: 'x' }, 'body'],
      ['field_values as an array', { field_values: ['x'] }, 'body.field_values'],
      ['a non-string field value', { field_values: { username: 1 } }, 'body.field_values.username'],
      ['a field value over 4096 characters', { field_values: { password: 'x'.repeat(4097) } }, 'body.field_values.password'],
      ['65 field values', { field_values: Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`f${i}`, 'v'])) }, 'body.field_values'],
      ['a field id with a control character', { field_values: { 'a\nb': 'v' } }, 'body.field_values'],
      ['an empty selected_choice_id', { selected_choice_id: '' }, 'body.selected_choice_id'],
    ])('refuses a submission with %s with 400', async (_case, body, field) => {
      const connection = await create(api, { domain: 'example.com', profile_name: unique('bad-submit') });
      const res = await api.post(`/auth/connections/${connection.id}/submit`, body);
      expectError(res, 400, 'invalid_request');
      expect(errorFields(res).some((f) => f === field || f.startsWith(`${field}.`)), JSON.stringify(errorFields(res))).toBe(true);
    });

    it('shows an empty timeline, 404 for an unknown connection, and validates the type filter', async () => {
      const connection = await create(api, { domain: 'example.com', profile_name: unique('timeline') });
      for (const query of ['', '?type=login', '?type=reauth', '?type=health_check', '?limit=1&offset=3']) {
        const res = await api.get(`/auth/connections/${connection.id}/timeline${query}`);
        expect(res.status, res.text).toBe(200);
        expect(res.body).toEqual([]);
        expect([res.headers.get('x-has-more'), res.headers.get('x-next-offset')]).toEqual(['false', '0']);
      }
      expectError(await api.get('/auth/connections/mauth_doesnotexist/timeline'), 404, 'not_found');
      for (const query of ['type=LOGIN', 'type=flow', 'limit=101', 'limit=0']) {
        const res = await api.get(`/auth/connections/${connection.id}/timeline?${query}`);
        expectError(res, 400, 'invalid_request');
        expect(errorFields(res)[0], query).toMatch(/^query\./);
      }
    });

    it('refuses POST …/login for an unknown connection with 404 and bad login bodies with 400', async () => {
      expectError(await api.post('/auth/connections/mauth_doesnotexist/login', {}), 404, 'not_found');
      const connection = await create(api, { domain: 'example.com', profile_name: unique('login-body') });
      for (const body of [{ unknown: true }, { proxy: {} }, { record_session: 'yes' }]) {
        expectError(await api.post(`/auth/connections/${connection.id}/login`, body), 400, 'invalid_request');
      }
      expectError(await api.post(`/auth/connections/${connection.id}/login`, { proxy: { name: 'nobody' } }), 400, 'invalid_proxy');
      const { rows } = await app.database.db.query('SELECT id FROM auth_flows WHERE connection_id = $1', [connection.id]);
      expect(rows).toEqual([]);
      expect((await api.get(`/auth/connections/${connection.id}`)).body.flow_status).toBeNull();
    });
  });

  describe('flow state (flows arranged in the database)', () => {
    it('shows a finished flow as COMPLETED, without its view, browser or hosted page, and refuses submissions', async () => {
      const connection = await create(api, { domain: 'example.com', profile_name: unique('finished') });
      await arrangeFlow(connection, { status: 'FAILED', step: 'SUBMITTING', view: loginView, sessionId: 'sess_gone', error: ['login_failed', 'Wrong password'] });
      const res = await api.get(`/auth/connections/${connection.id}`);
      expect(res.body).toMatchObject({
        flow_status: 'FAILED',
        flow_step: 'COMPLETED',
        flow_type: 'LOGIN',
        flow_expires_at: new Date(clock.now().getTime() + 15 * 60_000).toISOString(),
        browser_session_id: null,
        live_view_url: null,
        hosted_url: null,
        fields: null,
        choices: null,
        error_code: 'login_failed',
        error_message: 'Wrong password',
      });
      expectError(await api.post(`/auth/connections/${connection.id}/submit`, { field_values: { username: 'u', password: 'p' } }), 409, 'flow_not_running');
    });

    it('refuses a submission to a flow past its expiry that the engine has not marked EXPIRED yet, and stores nothing', async () => {
      const connection = await create(api, { domain: 'example.com', profile_name: unique('expired') });
      const flowId = await arrangeFlow(connection, { status: 'IN_PROGRESS', step: 'AWAITING_INPUT', view: loginView, startedAt: new Date(clock.now().getTime() - 16 * 60_000) });
      expectError(await api.post(`/auth/connections/${connection.id}/submit`, { field_values: { username: 'u', password: 'p' } }), 409, 'flow_not_running');
      const { rows } = await app.database.db.query('SELECT pending_input FROM auth_flows WHERE id = $1', [flowId]);
      expect(rows[0].pending_input).toBeNull();
    });

    it('takes a submission that fits the awaiting step once, sealed, and refuses ones that do not fit', async () => {
      const connection = await create(api, { domain: 'example.com', profile_name: unique('awaiting') });
      const flowId = await arrangeFlow(connection, { status: 'IN_PROGRESS', step: 'AWAITING_INPUT', view: loginView });
      const shown = (await api.get(`/auth/connections/${connection.id}`)).body;
      expect(shown).toMatchObject({ flow_status: 'IN_PROGRESS', flow_step: 'AWAITING_INPUT', fields: loginView.fields, choices: loginView.choices });
      expect(shown.hosted_url).toBe(`${app.url}/auth/hosted/${flowId}`);

      const submit = (body: object) => api.post(`/auth/connections/${connection.id}/submit`, body);
      const unknownField = await submit({ field_values: { username: 'u', password: 'p', email: 'e' } });
      expectError(unknownField, 400, 'invalid_submission');
      expect(errorFields(unknownField)).toEqual(['body.field_values.email']);
      const missing = await submit({ field_values: { username: 'u' } });
      expectError(missing, 400, 'invalid_submission');
      expect(errorFields(missing)).toEqual(['body.field_values.password']);
      expectError(await submit({ selected_choice_id: 'sso_github' }), 400, 'invalid_submission');
      expectError(await submit({}), 400, 'invalid_submission');
      const pending = async () =>
        (await app.database.db.query<{ pending_input: string | null; input_seq: number }>('SELECT pending_input, input_seq FROM auth_flows WHERE id = $1', [flowId]))
          .rows[0]!;
      expect(await pending()).toEqual({ pending_input: null, input_seq: 0 });

      const taken = await submit({ field_values: { username: 'alice', password: 'hunter2-sealed' } });
      expect([taken.status, taken.body]).toEqual([200, { accepted: true }]);
      const stored = await pending();
      expect(stored.input_seq).toBe(1);
      expect(stored.pending_input).not.toContain('hunter2-sealed');
      expect(stored.pending_input).not.toContain('alice');
      // The driver has not taken it yet: a second one is not accepted.
      const second = await submit({ selected_choice_id: 'sso_google' });
      expect([second.status, second.body]).toEqual([200, { accepted: false }]);
      expect((await pending()).input_seq).toBe(1);
    });

    it('does not accept a submission while the flow is not awaiting input', async () => {
      const connection = await create(api, { domain: 'example.com', profile_name: unique('discovering') });
      await arrangeFlow(connection, { status: 'IN_PROGRESS', step: 'DISCOVERING' });
      const res = await api.post(`/auth/connections/${connection.id}/submit`, { field_values: { username: 'u' } });
      expect([res.status, res.body]).toEqual([200, { accepted: false }]);
    });

    it('lists the timeline newest first, filtered by type and paged', async () => {
      const connection = await create(api, { domain: 'example.com', profile_name: unique('history') });
      const t0 = clock.now().getTime();
      const at = (minutes: number) => new Date(t0 + minutes * 60_000);
      const login = await arrangeFlow(connection, { status: 'SUCCESS', step: 'SUBMITTING', startedAt: at(1), sessionId: 'sess_login', current: false });
      const reauth = await arrangeFlow(connection, { type: 'REAUTH', status: 'EXPIRED', step: 'AWAITING_INPUT', startedAt: at(3), error: ['flow_expired', 'The login flow expired'] });
      await app.database.db.query(
        `INSERT INTO auth_health_checks (id, connection_id, status, previous_status, browser_session_id, started_at, updated_at)
         VALUES ('mahc_done', $1, 'NEEDS_AUTH', 'AUTHENTICATED', 'sess_check', $2, $2), ('mahc_running', $1, NULL, 'NEEDS_AUTH', NULL, $3, $3)`,
        [connection.id, at(2), at(4)],
      );
      const timeline = async (query = '') => {
        const res = await api.get(`/auth/connections/${connection.id}/timeline${query}`);
        expect(res.status, res.text).toBe(200);
        return res;
      };
      expect((await timeline()).body).toEqual([
        { id: 'mahc_running', type: 'health_check', status: 'NEEDS_AUTH', previous_status: 'NEEDS_AUTH', timestamp: at(4).toISOString(), updated_at: at(4).toISOString(), telemetry_captured: false },
        {
          id: reauth,
          type: 'reauth',
          status: 'EXPIRED',
          step: 'EXPIRED',
          error_code: 'flow_expired',
          error_message: 'The login flow expired',
          timestamp: at(3).toISOString(),
          updated_at: at(3).toISOString(),
          telemetry_captured: false,
        },
        {
          id: 'mahc_done',
          type: 'health_check',
          status: 'NEEDS_AUTH',
          previous_status: 'AUTHENTICATED',
          browser_session_id: 'sess_check',
          timestamp: at(2).toISOString(),
          updated_at: at(2).toISOString(),
          telemetry_captured: false,
        },
        { id: login, type: 'login', status: 'SUCCESS', step: 'COMPLETED', browser_session_id: 'sess_login', timestamp: at(1).toISOString(), updated_at: at(1).toISOString(), telemetry_captured: false },
      ]);
      const ids = async (query: string) => ((await timeline(query)).body as Array<{ id: string }>).map((e) => e.id);
      expect(await ids('?type=health_check')).toEqual(['mahc_running', 'mahc_done']);
      expect(await ids('?type=login')).toEqual([login]);
      expect(await ids('?type=reauth')).toEqual([reauth]);
      const first = await timeline('?limit=3');
      expect([first.body.length, first.headers.get('x-has-more'), first.headers.get('x-next-offset')]).toEqual([3, 'true', '3']);
      const rest = await timeline('?limit=3&offset=3');
      expect([idsIn(rest), rest.headers.get('x-has-more'), rest.headers.get('x-next-offset')]).toEqual([[login], 'false', '0']);
    });
  });
});
