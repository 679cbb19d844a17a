import type Kernel from '@onkernel/sdk';
import { ConflictError, NotFoundError } from '@onkernel/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ConnectionFollowResponse } from '@onkernel/sdk/resources/auth/connections.js';
import { EMAIL, PASSWORD, startLoginSites, TOTP_SECRET, USERNAME, type LoginSites, type LoginShape } from '../fixtures/login-sites/server.js';
import { eventually } from '../support/eventually.js';
import { unique } from './support/sdk.js';
import { cleanupServices, startService, type RunningService } from '../support/service.js';

/**
 * Managed auth through the official SDK against the built service: a connection, a login
 * followed over the SDK's SSE decoder and answered with submit, the timeline, and the
 * CRUD calls as the SDK sends them. The website is the local fixture (real Chromium in
 * the service drives it): every login shape, the way an SDK user would write it.
 */

type StateEvent = Extract<ConnectionFollowResponse, { event: 'managed_auth_state' }>;

/**
 * Starts a login and answers it as a person would, from the SDK's event stream:
 * `answer` picks the submission for each AWAITING_INPUT state. Returns the states seen.
 */
async function loginAndFollow(id: string, answer: (state: StateEvent) => Parameters<Kernel['auth']['connections']['submit']>[1]): Promise<StateEvent[]> {
  await kernel.auth.connections.login(id);
  const states: StateEvent[] = [];
  for await (const event of await kernel.auth.connections.follow(id)) {
    if (event.event !== 'managed_auth_state') continue;
    states.push(event);
    if (event.flow_step === 'AWAITING_INPUT') expect(await kernel.auth.connections.submit(id, answer(event))).toEqual({ accepted: true });
  }
  return states;
}

const valuesFor = (state: StateEvent, values: Record<string, string>) => ({
  field_values: Object.fromEntries((state.fields ?? []).map((f) => [f.id, values[f.type] ?? ''])),
});

async function connection(shape: LoginShape, extra: Parameters<Kernel['auth']['connections']['create']>[0] extends infer T ? Partial<T> : never = {}) {
  return kernel.auth.connections.create({
    domain: sites.domain(shape),
    profile_name: unique(shape),
    login_url: sites.url(shape, shape === 'landing' ? '/' : '/login'),
    health_checks: false,
    ...extra,
  });
}

let service: RunningService;
let kernel: Kernel;
let sites: LoginSites;

beforeAll(async () => {
  sites = await startLoginSites();
  // Health checks as often as every second, so the re-auth test need not wait long.
  service = await startService({ env: { BROWSERPLANE_AUTH_MIN_HEALTH_CHECK_INTERVAL_SECONDS: '1' } });
  kernel = service.client();
});
afterAll(async () => {
  await cleanupServices();
  await sites?.close();
});

describe('managed auth through the SDK', () => {
  it('logs in: follow shows every state, submit answers the step, the stream ends at SUCCESS', async () => {
    const profile = unique('auth-profile');
    const created = await kernel.auth.connections.create({
      domain: sites.domain('single'),
      profile_name: profile,
      login_url: sites.url('single', '/login'),
      health_checks: false,
    });
    expect(created).toMatchObject({ domain: sites.domain('single'), profile_name: profile, status: 'NEEDS_AUTH', save_credentials: true, record_session: false });
    await expect(kernel.auth.connections.create({ domain: sites.domain('single'), profile_name: profile })).rejects.toBeInstanceOf(ConflictError);

    const started = await kernel.auth.connections.login(created.id);
    expect(started).toMatchObject({ flow_type: 'LOGIN', hosted_url: expect.stringContaining('#code='), live_view_url: expect.any(String) });

    const stream = await kernel.auth.connections.follow(created.id);
    const seen: string[] = [];
    for await (const event of stream) {
      if (event.event !== 'managed_auth_state') continue;
      seen.push(`${event.flow_status}/${event.flow_step}`);
      if (event.flow_step === 'AWAITING_INPUT' && event.fields) {
        const values: Record<string, string> = {};
        for (const field of event.fields) values[field.id] = field.type === 'password' ? PASSWORD : USERNAME;
        const answer = await kernel.auth.connections.submit(created.id, { field_values: values });
        expect(answer).toEqual({ accepted: true });
      }
    }
    expect(seen).toContain('IN_PROGRESS/AWAITING_INPUT');
    expect(seen.at(-1)).toBe('SUCCESS/COMPLETED');

    const after = await kernel.auth.connections.retrieve(created.id);
    expect(after).toMatchObject({ status: 'AUTHENTICATED', flow_status: 'SUCCESS', post_login_url: sites.url('single', '/account') });
    const timeline = [];
    for await (const entry of kernel.auth.connections.timeline(created.id)) timeline.push(entry);
    expect(timeline).toEqual([expect.objectContaining({ id: started.id, type: 'login', status: 'SUCCESS' })]);
  }, 180_000);

  it('a rejected password is asked again with the site’s own words; the right one signs in', async () => {
    const conn = await connection('single', { save_credentials: false });
    let round = 0;
    const states = await loginAndFollow(conn.id, (state) => valuesFor(state, { identifier: USERNAME, password: round++ === 0 ? 'wrong' : PASSWORD }));
    const asked = states.filter((state) => state.flow_step === 'AWAITING_INPUT');
    expect(asked.map((state) => state.website_error ?? null)).toEqual([null, 'Incorrect username or password.']);
    expect(states.at(-1)).toMatchObject({ flow_status: 'SUCCESS', flow_step: 'COMPLETED' });
  }, 120_000);

  it('a password refused three times: FAILED with the site’s own words', async () => {
    const conn = await connection('single', { save_credentials: false });
    const states = await loginAndFollow(conn.id, (state) => valuesFor(state, { identifier: USERNAME, password: 'wrong' }));
    expect(states.filter((state) => state.flow_step === 'AWAITING_INPUT')).toHaveLength(3);
    expect(states.at(-1)).toMatchObject({ flow_status: 'FAILED', error_code: 'login_rejected', website_error: 'Incorrect username or password.' });
  }, 120_000);

  it('identifier first, then password, unattended with a stored credential', async () => {
    const cred = await kernel.credentials.create({ name: unique('twostep'), domain: sites.domain('twostep'), values: { email: EMAIL, password: PASSWORD } });
    const conn = await connection('twostep', { credential: { name: cred.name } });
    const states = await loginAndFollow(conn.id, () => {
      throw new Error('an unattended login asked for input');
    });
    expect(states.at(-1)).toMatchObject({ flow_status: 'SUCCESS' });
  }, 120_000);

  it('TOTP generated from the credential’s secret', async () => {
    const cred = await kernel.credentials.create({
      name: unique('totp'),
      domain: sites.domain('totp'),
      values: { username: USERNAME, password: PASSWORD },
      totp_secret: TOTP_SECRET,
    });
    const conn = await connection('totp', { credential: { name: cred.name } });
    const states = await loginAndFollow(conn.id, () => {
      throw new Error('an unattended login asked for input');
    });
    expect(states.at(-1)).toMatchObject({ flow_status: 'SUCCESS' });
    expect(await kernel.auth.connections.retrieve(conn.id)).toMatchObject({ can_reauth: true, can_reauth_reason: 'requirements_satisfiable' });
  }, 120_000);

  it('a choice between SMS and TOTP: the person picks SMS and types the code sent', async () => {
    const conn = await connection('choice');
    const states = await loginAndFollow(conn.id, (state) => {
      const sms = state.choices?.find((c) => c.id.startsWith('mfa_sms'));
      if (sms) return { selected_choice_id: sms.id };
      if (state.fields?.some((f) => f.type === 'code')) return valuesFor(state, { code: sites.lastSmsCode('choice')! });
      return valuesFor(state, { identifier: USERNAME, password: PASSWORD });
    });
    expect(states.some((s) => (s.mfa_options ?? []).some((o) => o.type === 'sms' && (o.target ?? '').includes('1234')))).toBe(true);
    expect(states.at(-1)).toMatchObject({ flow_status: 'SUCCESS' });
    expect(await kernel.auth.connections.retrieve(conn.id)).toMatchObject({ can_reauth: false, can_reauth_reason: 'requires_sms_code' });
  }, 120_000);

  it('SSO: the person picks the identity provider’s button and signs in there', async () => {
    const conn = await connection('sso', { allowed_domains: [sites.idpHost] });
    const states = await loginAndFollow(conn.id, (state) => {
      const sso = state.pending_sso_buttons?.[0];
      if (sso) return { sso_button_selector: sso.selector };
      return valuesFor(state, { identifier: USERNAME, password: PASSWORD });
    });
    expect(states.at(-1)).toMatchObject({ flow_status: 'SUCCESS' });
  }, 120_000);

  it('a redirect to a domain that is not allowed ends the flow, and the host is never reached', async () => {
    const conn = await connection('redirect');
    const states = await loginAndFollow(conn.id, (state) => valuesFor(state, { identifier: USERNAME, password: PASSWORD }));
    expect(states.at(-1)).toMatchObject({ flow_status: 'FAILED', error_code: 'domain_not_allowed' });
    expect(sites.requests(sites.trackerHost)).toEqual([]);
  }, 120_000);

  it('the login page is found from the home page’s "Log in" link', async () => {
    const conn = await connection('landing');
    const states = await loginAndFollow(conn.id, (state) => valuesFor(state, { identifier: USERNAME, password: PASSWORD }));
    expect(states.at(-1)).toMatchObject({ flow_status: 'SUCCESS' });
  }, 120_000);

  it('an expired site session: the health check sees NEEDS_AUTH and re-auth restores the login', async () => {
    const cred = await kernel.credentials.create({ name: unique('reauth'), domain: sites.domain('single'), values: { username: USERNAME, password: PASSWORD } });
    const conn = await connection('single', { credential: { name: cred.name } });
    const first = await loginAndFollow(conn.id, () => {
      throw new Error('an unattended login asked for input');
    });
    expect(first.at(-1)).toMatchObject({ flow_status: 'SUCCESS' });
    sites.expireSessions('single');
    await kernel.auth.connections.update(conn.id, { health_checks: true, health_check_interval: 2 });
    const current = await eventually(() => kernel.auth.connections.retrieve(conn.id), {
      timeoutMs: 120_000,
      intervalMs: 500,
      what: 'a successful re-auth',
      accept: (c) => c.flow_type === 'REAUTH' && c.flow_status === 'SUCCESS',
    });
    await kernel.auth.connections.update(conn.id, { health_checks: false });
    expect(current).toMatchObject({ flow_type: 'REAUTH', flow_status: 'SUCCESS', status: 'AUTHENTICATED' });
    const timeline = [];
    for await (const entry of kernel.auth.connections.timeline(conn.id)) timeline.push(`${entry.type}:${entry.status}`);
    expect(timeline).toEqual(expect.arrayContaining(['reauth:SUCCESS', 'health_check:NEEDS_AUTH', 'login:SUCCESS']));
    const checks = [];
    for await (const entry of kernel.auth.connections.timeline(conn.id, { type: 'health_check' })) checks.push(entry.type);
    expect(new Set(checks)).toEqual(new Set(['health_check']));
  }, 180_000);

  it('updates, lists with filters, and deletes', async () => {
    const profile = unique('auth-list');
    const created = await kernel.auth.connections.create({ domain: sites.domain('twostep'), profile_name: profile, health_checks: false });
    const updated = await kernel.auth.connections.update(created.id, { allowed_domains: [sites.idpHost], login_url: sites.url('twostep', '/login') });
    expect(updated).toMatchObject({ allowed_domains: [sites.idpHost], login_url: sites.url('twostep', '/login'), health_checks: false });
    const listed = [];
    for await (const item of kernel.auth.connections.list({ profile_name: profile })) listed.push(item.id);
    expect(listed).toEqual([created.id]);
    await kernel.auth.connections.delete(created.id);
    await expect(kernel.auth.connections.retrieve(created.id)).rejects.toBeInstanceOf(NotFoundError);
  }, 60_000);
});
