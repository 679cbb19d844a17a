import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { buildApp } from '../../api/src/app.js';
import { createAppServices } from '../../api/src/app-services.js';
import { systemClock } from '../../api/src/clock.js';
import { createPgEventHub } from '../../api/src/events/hub.js';
import { EMAIL, PASSWORD, startLoginSites, TOTP_SECRET, USERNAME, type LoginSites } from '../fixtures/login-sites/server.js';
import { eventually } from '../support/eventually.js';
import { HttpClient } from '../support/http.js';
import { openSse } from '../support/sse.js';
import { startTestApp, type TestApp } from '../support/test-app.js';

/**
 * The login-flow engine end to end: real Chromium (local runtime) driven through the
 * fixture websites' login shapes, through the HTTP API (login, submit, events, timeline),
 * with the job queue running for scheduled health checks.
 */

let app: TestApp;
let sites: LoginSites;

beforeAll(async () => {
  sites = await startLoginSites();
  app = await startTestApp({
    background: { jobs: true, jobPollIntervalMs: 300 },
    settings: { authMinHealthCheckIntervalSeconds: 1 },
  });
}, 60_000);
afterAll(async () => {
  await app?.close();
  await sites?.close();
});

// Response bodies are read loosely here; the shapes are asserted by the expectations.
type Json = Record<string, any>;
type Field = { id: string; type: string; ref: string };

/** Reads an SSE response to its end (or `limitMs`), returning every data frame parsed. */
async function collectEvents(path: string, limitMs = 90_000, base?: string): Promise<{ frames: Json[]; ended: boolean }> {
  const limit = new AbortController();
  const timer = setTimeout(() => limit.abort(), limitMs);
  try {
    const stream = await openSse<Json>((base ?? app.url) + path, { key: app.tenant.adminKey, signal: limit.signal });
    expect(stream.res.status).toBe(200);
    await stream.ended;
    return { frames: stream.payloads, ended: !limit.signal.aborted };
  } catch (error) {
    if (!limit.signal.aborted) throw error;
    return { frames: [], ended: false };
  } finally {
    clearTimeout(timer);
  }
}

async function waitFor(id: string, predicate: (c: Json) => boolean, what: string, timeoutMs = 60_000, failFast = true): Promise<Json> {
  let last: Json | undefined;
  return eventually(
    async () => {
      const res = await app.tenant.http.get(`/auth/connections/${id}`);
      last = res.body as Json;
      if (predicate(last)) return last;
      // A flow that ended otherwise will not get there: report it now.
      if (failFast && last.flow_status && last.flow_status !== 'IN_PROGRESS') throw new Error(`waiting for ${what}: last state ${JSON.stringify(last)}`);
      return undefined;
    },
    { timeoutMs, intervalMs: 150, what: `waiting for ${what}`, detail: () => `last state ${JSON.stringify(last)}` },
  );
}

const awaitingInput = (id: string) => waitFor(id, (c) => c.flow_step === 'AWAITING_INPUT', 'AWAITING_INPUT');
const finished = (id: string) => waitFor(id, (c) => c.flow_status !== 'IN_PROGRESS' && c.flow_status !== null, 'the end of the flow', 90_000);

async function connect(body: Json): Promise<Json> {
  const res = await app.tenant.http.post('/auth/connections', { health_checks: false, ...body });
  expect(res.status, res.text).toBe(200);
  return res.body as Json;
}

async function login(id: string): Promise<Json> {
  const res = await app.tenant.http.post(`/auth/connections/${id}/login`, {});
  expect(res.status, res.text).toBe(200);
  return res.body as Json;
}

async function submit(id: string, body: Json): Promise<void> {
  const res = await app.tenant.http.post(`/auth/connections/${id}/submit`, body);
  expect(res.status, res.text).toBe(200);
  expect(res.body).toEqual({ accepted: true });
}

async function credential(name: string, domain: string, values: Json, totpSecret?: string): Promise<void> {
  const res = await app.tenant.http.post('/credentials', { name, domain, values, ...(totpSecret ? { totp_secret: totpSecret } : {}) });
  expect(res.status, res.text).toBe(200);
}

const fieldId = (state: Json, type: string): string => (state.fields as Field[]).find((f) => f.type === type)!.id;

describe('interactive login through the API', () => {
  it('single page: fields discovered, submitted, SUCCESS, profile and credential saved, events and timeline', async () => {
    const conn = await connect({ domain: sites.domain('single'), profile_name: 'single-user', login_url: sites.url('single', '/login') });
    const started = await login(conn.id);
    expect(started).toMatchObject({ flow_type: 'LOGIN', handoff_code: expect.any(String) });
    expect(started.hosted_url).toContain(`/auth/hosted/${started.id}#code=${started.handoff_code}`);
    expect(started.live_view_url).toMatch(/\/browsers\/.+\/live\?token=/);
    const events = collectEvents(`/auth/connections/${conn.id}/events`);

    const step = await awaitingInput(conn.id);
    expect((step.fields as Field[]).map((f) => [f.type, f.ref])).toEqual([
      ['identifier', 'username'],
      ['password', 'password'],
    ]);
    expect(step.discovered_fields).toHaveLength(2);
    expect(step.browser_session_id).toMatch(/^bs_/);
    await submit(conn.id, { field_values: { [fieldId(step, 'identifier')]: USERNAME, [fieldId(step, 'password')]: PASSWORD } });

    const done = await finished(conn.id);
    expect(done).toMatchObject({ flow_status: 'SUCCESS', flow_step: 'COMPLETED', status: 'AUTHENTICATED', browser_session_id: null });
    expect(done.post_login_url).toBe(sites.url('single', '/account'));
    expect(done.last_auth_check_at).toEqual(expect.any(String));
    // save_credentials (default): what was typed is stored, sealed, for re-auth.
    expect(done.credential).toEqual({ name: `single-user-${sites.domain('single')}` });
    expect(done).toMatchObject({ can_reauth: true, can_reauth_reason: 'requirements_satisfiable' });
    const cred = await app.tenant.http.get(`/credentials/${encodeURIComponent(done.credential.name)}`);
    expect([...cred.body.value_keys].sort()).toEqual(['password', 'username']);

    const { frames, ended } = await events;
    expect(ended).toBe(true);
    const states = frames.filter((f) => f.event === 'managed_auth_state');
    expect(states.length).toBeGreaterThanOrEqual(2);
    expect(states.every((s) => Object.values(s).every((v) => v !== null))).toBe(true);
    expect(states.map((s) => String(s.flow_step))).toContain('SUBMITTING');
    expect(states.at(-1)).toMatchObject({ flow_status: 'SUCCESS', flow_step: 'COMPLETED', post_login_url: sites.url('single', '/account') });

    const timeline = await app.tenant.http.get(`/auth/connections/${conn.id}/timeline`);
    expect(timeline.body).toEqual([expect.objectContaining({ id: started.id, type: 'login', status: 'SUCCESS', step: 'COMPLETED' })]);

    // The profile now holds the site's login: a health check (run here rather than
    // waiting an interval) finds it logged in.
    expect((await app.tenant.http.patch(`/auth/connections/${conn.id}`, { health_checks: true })).status).toBe(200);
    await app.services.flows.healthCheck(conn.id);
    const checked = await app.tenant.http.get(`/auth/connections/${conn.id}/timeline?type=health_check`);
    expect(checked.body).toEqual([expect.objectContaining({ type: 'health_check', status: 'AUTHENTICATED', previous_status: 'AUTHENTICATED' })]);
  }, 150_000);

  it('a client on another replica follows the flow and answers it (LISTEN/NOTIFY across replicas)', async () => {
    // Replica B: the same database, its own event hub (LISTEN connection) and HTTP server.
    const hubB = createPgEventHub(app.database.url, app.database.db, app.deps.log);
    const depsB = { ...app.deps, events: hubB };
    const { app: handler } = buildApp(depsB, createAppServices(depsB));
    const server = await new Promise<Server>((resolve) => {
      const s = handler.listen(0, '127.0.0.1', () => resolve(s));
    });
    const urlB = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      const conn = await connect({ domain: sites.domain('single'), profile_name: 'replica-b', login_url: sites.url('single', '/login') });
      await login(conn.id); // driven by replica A
      const events = collectEvents(`/auth/connections/${conn.id}/events`, 90_000, urlB);
      const step = await awaitingInput(conn.id);
      const b = new HttpClient(urlB, app.tenant.adminKey);
      const answer = await b.post(`/auth/connections/${conn.id}/submit`, {
        field_values: { [fieldId(step, 'identifier')]: USERNAME, [fieldId(step, 'password')]: PASSWORD },
      });
      expect(answer.body).toEqual({ accepted: true });
      const { frames, ended } = await events;
      expect(ended).toBe(true);
      expect(frames.filter((f) => f.event === 'managed_auth_state').at(-1)).toMatchObject({ flow_status: 'SUCCESS' });
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
      await hubB.close();
    }
  }, 120_000);

  it('a rejected password is asked again in the same flow, with the site’s error; the right one then signs in', async () => {
    const conn = await connect({ domain: sites.domain('single'), profile_name: 'wrong-pass', login_url: sites.url('single', '/login'), save_credentials: false });
    const started = await login(conn.id);
    const step = await awaitingInput(conn.id);
    expect(step.website_error ?? null).toBeNull();
    await submit(conn.id, { field_values: { [fieldId(step, 'identifier')]: USERNAME, [fieldId(step, 'password')]: 'nope' } });
    const again = await waitFor(conn.id, (c) => c.flow_step === 'AWAITING_INPUT' && c.website_error === 'Incorrect username or password.', 'the password asked again');
    expect(again).toMatchObject({ flow_status: 'IN_PROGRESS', status: 'NEEDS_AUTH' });
    await submit(conn.id, { field_values: { [fieldId(again, 'identifier')]: USERNAME, [fieldId(again, 'password')]: PASSWORD } });
    const done = await finished(conn.id);
    expect(done).toMatchObject({ flow_status: 'SUCCESS', status: 'AUTHENTICATED' });
    expect(done.website_error ?? null).toBeNull();
    // One flow throughout: the retry did not start another.
    const timeline = await app.tenant.http.get(`/auth/connections/${conn.id}/timeline`);
    expect(timeline.body).toEqual([expect.objectContaining({ id: started.id, type: 'login', status: 'SUCCESS' })]);
  }, 120_000);

  it('choice of SMS: the code sent to the phone is asked for and the login needs a person next time', async () => {
    const conn = await connect({ domain: sites.domain('choice'), profile_name: 'choice-sms', login_url: sites.url('choice', '/login') });
    await login(conn.id);
    let step = await awaitingInput(conn.id);
    const discovered = step.discovered_fields as Array<{ name: string }>;
    await submit(conn.id, { fields: { [discovered[0]!.name]: USERNAME, [discovered[1]!.name]: PASSWORD } });
    step = await waitFor(conn.id, (c) => c.flow_step === 'AWAITING_INPUT' && (c.choices ?? []).length > 0, 'the MFA choice');
    const options = step.mfa_options as Array<{ type: string; target: string | null }>;
    expect(options.map((o) => o.type).sort()).toEqual(['sms', 'totp']);
    expect(options.find((o) => o.type === 'sms')?.target).toContain('1234');
    await submit(conn.id, { mfa_option_id: 'sms' });
    step = await waitFor(conn.id, (c) => c.flow_step === 'AWAITING_INPUT' && ((c.fields ?? []) as Field[]).some((f) => f.type === 'code'), 'the SMS code field');
    await submit(conn.id, { field_values: { [fieldId(step, 'code')]: sites.lastSmsCode('choice')! } });
    const done = await finished(conn.id);
    expect(done).toMatchObject({ flow_status: 'SUCCESS', status: 'AUTHENTICATED', can_reauth: false, can_reauth_reason: 'requires_sms_code' });
  }, 150_000);

  it('a login re-creates the profile under its name when it was deleted meanwhile', async () => {
    const conn = await connect({ domain: sites.domain('single'), profile_name: 'recreated', login_url: sites.url('single', '/login') });
    expect((await app.tenant.http.delete('/profiles/recreated')).status).toBe(204);
    await login(conn.id);
    await awaitingInput(conn.id);
    const profile = await app.tenant.http.get('/profiles/recreated');
    expect(profile.status).toBe(200);
    expect((await app.tenant.http.get(`/auth/connections/${conn.id}`)).body).toMatchObject({ profile_name: 'recreated', flow_status: 'IN_PROGRESS' });
    expect((await app.tenant.http.delete(`/auth/connections/${conn.id}`)).status).toBe(204);
  }, 120_000);

  it('a deleted connection cancels its login: the stream ends with CANCELED and the browser closes', async () => {
    const conn = await connect({ domain: sites.domain('single'), profile_name: 'to-delete', login_url: sites.url('single', '/login') });
    await login(conn.id);
    const step = await awaitingInput(conn.id);
    const events = collectEvents(`/auth/connections/${conn.id}/events`);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect((await app.tenant.http.delete(`/auth/connections/${conn.id}`)).status).toBe(204);
    const { frames, ended } = await events;
    expect(ended).toBe(true);
    expect(frames.filter((f) => f.event === 'managed_auth_state').at(-1)).toMatchObject({ flow_status: 'CANCELED' });
    const session = await eventually(() => app.tenant.http.get(`/browsers/${step.browser_session_id}`), {
      timeoutMs: 30_000,
      intervalMs: 200,
      what: 'the flow’s browser to close',
      accept: (s) => !(s.status === 200 && !s.body.deleted_at),
    });
    expect(session.status === 404 || Boolean(session.body.deleted_at)).toBe(true);
  }, 120_000);
});

describe('unattended logins with a stored credential', () => {
  it('identifier first, then password, with no person', async () => {
    await credential('twostep-cred', sites.domain('twostep'), { email: EMAIL, password: PASSWORD });
    const conn = await connect({ domain: sites.domain('twostep'), profile_name: 'twostep', login_url: sites.url('twostep', '/login'), credential: { name: 'twostep-cred' } });
    const events = collectEvents(`/auth/connections/${conn.id}/events`);
    await login(conn.id);
    const done = await finished(conn.id);
    expect(done).toMatchObject({ flow_status: 'SUCCESS', status: 'AUTHENTICATED' });
    const { frames } = await events;
    expect(frames.some((f) => f.flow_step === 'AWAITING_INPUT')).toBe(false);
  }, 120_000);

  it('TOTP codes are generated from the credential’s secret', async () => {
    await credential('totp-cred', sites.domain('totp'), { username: USERNAME, password: PASSWORD }, TOTP_SECRET);
    const conn = await connect({ domain: sites.domain('totp'), profile_name: 'totp', login_url: sites.url('totp', '/login'), credential: { name: 'totp-cred' } });
    await login(conn.id);
    const done = await finished(conn.id);
    expect(done).toMatchObject({ flow_status: 'SUCCESS', status: 'AUTHENTICATED', can_reauth: true, can_reauth_reason: 'requirements_satisfiable' });
  }, 120_000);

  it('the home page’s "Log in" link leads to the form', async () => {
    await credential('landing-cred', sites.domain('landing'), { username: USERNAME, password: PASSWORD });
    const conn = await connect({ domain: sites.domain('landing'), profile_name: 'landing', login_url: sites.url('landing', '/'), credential: { name: 'landing-cred' } });
    await login(conn.id);
    expect(await finished(conn.id)).toMatchObject({ flow_status: 'SUCCESS' });
  }, 120_000);

  it('SSO through a second identity provider host listed in allowed_domains', async () => {
    await credential('sso-cred', sites.domain('sso'), { username: USERNAME, password: PASSWORD });
    const conn = await connect({
      domain: sites.domain('sso'),
      profile_name: 'sso',
      login_url: sites.url('sso', '/login'),
      allowed_domains: [sites.idpHost],
    });
    await login(conn.id);
    const step = await awaitingInput(conn.id);
    expect(step.pending_sso_buttons).toEqual([expect.objectContaining({ label: expect.stringContaining('Acme'), selector: expect.any(String) })]);
    const choice = (step.choices as Json[]).find((c) => c.type === 'sso_provider')!;
    await submit(conn.id, { selected_choice_id: choice.id });
    const idp = await waitFor(conn.id, (c) => c.flow_step === 'AWAITING_INPUT' && ((c.fields ?? []) as Field[]).some((f) => f.type === 'password'), 'the IdP form');
    await submit(conn.id, { field_values: { [fieldId(idp, 'identifier')]: USERNAME, [fieldId(idp, 'password')]: PASSWORD } });
    const done = await finished(conn.id);
    expect(done).toMatchObject({ flow_status: 'SUCCESS', status: 'AUTHENTICATED' });
    expect(done.post_login_url).toContain(sites.domain('sso'));
    expect(sites.loginCount('idp')).toBeGreaterThanOrEqual(1);
  }, 150_000);

  it('a redirect to a domain not allowed is blocked and fails the flow; the host is never reached', async () => {
    await credential('redirect-cred', sites.domain('redirect'), { username: USERNAME, password: PASSWORD });
    const conn = await connect({ domain: sites.domain('redirect'), profile_name: 'redirect', login_url: sites.url('redirect', '/login'), credential: { name: 'redirect-cred' } });
    await login(conn.id);
    const done = await finished(conn.id);
    expect(done).toMatchObject({ flow_status: 'FAILED', error_code: 'domain_not_allowed', status: 'NEEDS_AUTH' });
    expect(done.error_message).toContain(sites.trackerHost);
    expect(sites.requests(sites.trackerHost)).toEqual([]);
  }, 120_000);
});

describe('health checks and re-auth', () => {
  it('an expired site session is found by the scheduled check and restored by an unattended re-auth', async () => {
    await credential('reauth-cred', sites.domain('single'), { username: USERNAME, password: PASSWORD });
    const conn = await connect({
      domain: sites.domain('single'),
      profile_name: 'reauth',
      login_url: sites.url('single', '/login'),
      credential: { name: 'reauth-cred' },
    });
    await login(conn.id);
    expect(await finished(conn.id)).toMatchObject({ flow_status: 'SUCCESS', status: 'AUTHENTICATED' });
    const loginsBefore = sites.loginCount('single');

    sites.expireSessions('single');
    // Scheduled through the job queue: every 2 s from now on.
    expect((await app.tenant.http.patch(`/auth/connections/${conn.id}`, { health_checks: true, health_check_interval: 2 })).status).toBe(200);
    const reauthed = await waitFor(
      conn.id,
      (c) => c.flow_type === 'REAUTH' && c.flow_status === 'SUCCESS',
      'a successful re-auth',
      120_000,
      false,
    );
    expect(reauthed.status).toBe('AUTHENTICATED');
    expect(sites.loginCount('single')).toBe(loginsBefore + 1);
    await app.tenant.http.patch(`/auth/connections/${conn.id}`, { health_checks: false });

    const timeline = (await app.tenant.http.get(`/auth/connections/${conn.id}/timeline?limit=100`)).body as Json[];
    const kinds = timeline.map((e) => `${e.type}:${e.status}`);
    expect(kinds).toContain('reauth:SUCCESS');
    expect(kinds).toContain('health_check:NEEDS_AUTH');
    expect(kinds.at(-1)).toBe('login:SUCCESS');
    // Newest first.
    const times = timeline.map((e) => Date.parse(e.timestamp));
    expect([...times].sort((a, b) => b - a)).toEqual(times);
  }, 200_000);
});

describe('expiry', () => {
  it('a login nobody answers EXPIRES at flow_expires_at and its browser closes', async () => {
    const short = await startTestApp({ settings: { authFlowTtlSeconds: 4 }, clock: systemClock });
    try {
      const http = short.tenant.http;
      const conn = (await http.post('/auth/connections', { domain: sites.domain('single'), profile_name: 'expiring', login_url: sites.url('single', '/login'), health_checks: false }))
        .body as Json;
      const started = (await http.post(`/auth/connections/${conn.id}/login`, {})).body as Json;
      expect(Date.parse(started.flow_expires_at) - Date.now()).toBeLessThanOrEqual(4_000);
      const state = await eventually(
        async () => {
          const shown = (await http.get(`/auth/connections/${conn.id}`)).body as Json;
          return shown.flow_status !== 'IN_PROGRESS' && shown;
        },
        { timeoutMs: 60_000, intervalMs: 200, what: 'the flow to end' },
      );
      expect(state).toMatchObject({ flow_status: 'EXPIRED', flow_step: 'COMPLETED', error_code: 'flow_expired', status: 'NEEDS_AUTH' });
      const timeline = (await http.get(`/auth/connections/${conn.id}/timeline`)).body as Json[];
      expect(timeline[0]).toMatchObject({ type: 'login', status: 'EXPIRED', step: 'EXPIRED', browser_session_id: expect.any(String) });
      const session = await http.get(`/browsers/${timeline[0]!.browser_session_id}`);
      expect(session.status === 404 || Boolean(session.body.deleted_at)).toBe(true);
      // A submission after the end is refused as such.
      const late = await http.post(`/auth/connections/${conn.id}/submit`, { field_values: { username: 'x' } });
      expect(late.status).toBe(409);
    } finally {
      await short.close();
    }
  }, 90_000);
});
