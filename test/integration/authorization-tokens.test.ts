import { randomBytes } from 'node:crypto';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../api/src/clock.js';
import { PASSWORD, USERNAME, startLoginSites, type LoginSites } from '../fixtures/login-sites/server.js';
import { eventually } from '../support/eventually.js';
import type { HttpClient } from '../support/http.js';
import { rawTar } from '../support/raw-tar.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import {
  exchangeCode,
  expectSameRefusal,
  expiredToken,
  firstFrame,
  foreignKeyToken,
  ghostOf,
  hostedPageAnswer,
  issuedToken,
  rowOf,
  sessionTokenAnswer,
  startSiteLogin,
  upgradeAnswer,
  withEditedExpiry,
  type Answer,
  type Kind,
  type PageRoute,
} from './authorization-tokens.fixtures.js';
import { newProject } from './browsers.fixtures.js';
import { readyBrowser } from '../support/ready-browser.js';

/**
 * The routes authorised by something other than an API key (the authorisation matrix
 * covers every API-key operation): the session's signed token on the CDP, WebDriver and
 * VNC WebSockets and the live view page, the same token bound to a pool lease, the
 * agent's profile token on the internal archive routes, and the hosted login page's
 * handoff code and page cookie. Each bad credential (none, malformed, another org's or
 * project's, expired, signed with another key, edited, for another purpose, moved to
 * another path, after the end) is refused, exactly as it is for an id that exists
 * nowhere, nothing changes, and then the good one works. Real Postgres, real Chromium
 * (local runtime) where the route needs a live browser.
 */

let app: TestApp;
let sites: LoginSites;
let victimApi: HttpClient;
let otherProjectApi: HttpClient;
let otherOrgApi: HttpClient;

interface Session {
  session_id: string;
  cdp_ws_url: string;
  webdriver_ws_url: string;
  browser_live_view_url?: string;
}
let victim: Session;
let otherProject: Session;
let otherOrg: Session;
let victimProfileId: string;

const tokenOf = (url: string) => new URL(url).searchParams.get('token')!;
const wsBase = () => app.url.replace(/^http/, 'ws');
const startLogin = (api: HttpClient) => startSiteLogin(api, sites);
const exchange = (flowId: string, body: unknown) => exchangeCode(app.url, flowId, body);
const pageAnswer = (route: PageRoute, flowId: string, cookie: string | undefined, submission: unknown = {}) =>
  hostedPageAnswer(app.url, route, flowId, cookie, submission);

async function createSession(api: HttpClient, body: Record<string, unknown> = {}): Promise<Session> {
  const res = await api.post('/browsers', { headless: true, timeout_seconds: 600, ...body });
  expect(res.status, res.text).toBe(200);
  return res.body as Session;
}

beforeAll(async () => {
  app = await startTestApp({ clock: systemClock, background: { poolIntervalMs: 250 } });
  sites = await startLoginSites();
  victimApi = (await newProject(app.tenant.http)).http;
  otherProjectApi = (await newProject(app.tenant.http)).http;
  otherOrgApi = (await app.newTenant('other')).http;
  const profile = await victimApi.post('/profiles', { name: `tokens-${Date.now()}` });
  expect(profile.status, profile.text).toBe(200);
  victimProfileId = profile.body.id;
  [victim, otherProject, otherOrg] = await Promise.all([
    createSession(victimApi, { headless: false, viewport: { width: 800, height: 600 }, profile: { id: victimProfileId, save_changes: true } }),
    createSession(otherProjectApi),
    createSession(otherOrgApi),
  ]);
}, 120_000);
afterAll(async () => {
  await app?.close();
  await sites?.close();
});

// ---- the session's client token: /browsers/{id}/{cdp,webdriver,vnc} and /live ------------

const KINDS: Kind[] = ['cdp', 'webdriver', 'vnc', 'live'];

const sessionAnswer = (kind: Kind, sessionId: string, token: string | undefined) => sessionTokenAnswer(app.url, kind, sessionId, token);

/** A bad credential: the token for a path's session id, and where it is presented. */
interface TokenCase {
  name: string;
  status: 401 | 403;
  token: (sessionId: string) => string | undefined | Promise<string | undefined>;
  /** The session whose path it is presented on, when not the victim's. */
  on?: () => string;
}

/** The same attacks against either purpose; `own` is the victim's genuine token of that purpose. */
function badTokens(purpose: 'cdp' | 'profile', own: () => string): TokenCase[] {
  const other = purpose === 'cdp' ? 'profile' : 'cdp';
  return [
    { name: 'no token', status: 401, token: () => undefined },
    { name: 'an empty token', status: 401, token: () => '' },
    { name: 'a malformed token', status: 401, token: () => 'not-a-token' },
    { name: 'a truncated token', status: 401, token: () => own().slice(0, -1) },
    // A cdp token as the API handed it to that client; a profile token as that session's agent holds it.
    { name: 'a token of another org’s session', status: 403, token: () => (purpose === 'cdp' ? tokenOf(otherOrg.cdp_ws_url) : issuedToken(app, otherOrg.session_id, purpose)) },
    {
      name: 'a token of another project’s session',
      status: 403,
      token: () => (purpose === 'cdp' ? tokenOf(otherProject.cdp_ws_url) : issuedToken(app, otherProject.session_id, purpose)),
    },
    { name: 'an expired token', status: 401, token: (id) => expiredToken(app, id, purpose) },
    { name: 'a token signed with another key', status: 403, token: (id) => foreignKeyToken(id, purpose) },
    { name: 'a token with its expiry edited', status: 403, token: () => withEditedExpiry(own()) },
    { name: `a ${other} token of the same session`, status: 403, token: (id) => issuedToken(app, id, other) },
    { name: 'the token moved to another org’s session path', status: 403, token: () => own(), on: () => otherOrg.session_id },
  ];
}

describe('session tokens on the CDP, WebDriver and VNC WebSockets and the live view page', () => {
  it('refuses every bad token exactly as for a session that does not exist, changes nothing, and the good token opens each', async () => {
    const own = tokenOf(victim.cdp_ws_url);
    const before = await rowOf(app.deps.db, 'browser_sessions', victim.session_id);
    const ghost = ghostOf(victim.session_id);
    let refusals = 0;
    for (const kind of KINDS) {
      for (const c of badTokens('cdp', () => own)) {
        const target = c.on?.() ?? victim.session_id;
        const real = await sessionAnswer(kind, target, await c.token(target));
        const none = await sessionAnswer(kind, ghost, await c.token(ghost));
        expect(real.status, `${kind}, ${c.name}`).toBe(c.status);
        expect(JSON.parse(real.body), `${kind}, ${c.name}`).toMatchObject({ code: c.status === 401 ? 'unauthorized' : 'forbidden', message: expect.any(String) });
        expectSameRefusal(`${kind}, ${c.name}`, real, none, { real: target, ghost });
        refusals += 1;
      }
    }
    expect(refusals).toBe(44);
    expect(await rowOf(app.deps.db, 'browser_sessions', victim.session_id)).toEqual(before);
    expect(app.cdpProxy.connections.count(victim.session_id)).toBe(0);
    expect(app.cdpProxy.connections.count(otherOrg.session_id)).toBe(0);

    // The good token opens each, on the browser it names.
    const cdp = await firstFrame(victim.cdp_ws_url, JSON.stringify({ id: 1, method: 'Browser.getVersion' }));
    expect(JSON.parse(cdp.data.toString())).toMatchObject({ id: 1, result: { product: expect.stringMatching(/Chrome/) } });
    const bidi = await firstFrame(victim.webdriver_ws_url, JSON.stringify({ id: 1, method: 'session.status', params: {} }));
    expect(JSON.parse(bidi.data.toString())).toMatchObject({ id: 1, type: 'success' });
    const vnc = await firstFrame(victim.cdp_ws_url.replace('/cdp?', '/vnc?'));
    expect(vnc.binary).toBe(true);
    expect(vnc.data.toString('latin1')).toMatch(/^RFB \d{3}\.\d{3}\n/);
    const page = await fetch(victim.browser_live_view_url!);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toMatch(/^text\/html/);
  }, 120_000);

  it('refuses the token once its session has ended, as for a session that never existed', async () => {
    const ended = await createSession(victimApi);
    const token = tokenOf(ended.cdp_ws_url);
    expect((await sessionAnswer('live', ended.session_id, token)).status).toBe(409); // headless, but the token was good
    expect((await victimApi.delete(`/browsers/${ended.session_id}`)).status).toBe(204);
    const ghost = ghostOf(ended.session_id);
    for (const kind of KINDS) {
      const real = await sessionAnswer(kind, ended.session_id, token);
      expect(real.status, kind).toBe(404);
      expectSameRefusal(`${kind} after the end`, real, await sessionAnswer(kind, ghost, await issuedToken(app, ghost)), { real: ended.session_id, ghost });
    }
    // The agent's profile token ends with the session too.
    const archive = (id: string, token: string) => fetch(`${app.url}/internal/browsers/${id}/profile?token=${token}`);
    const real = await archive(ended.session_id, await issuedToken(app, ended.session_id, 'profile'));
    const none = await archive(ghost, await issuedToken(app, ghost, 'profile'));
    expectSameRefusal('profile after the end', { status: real.status, body: await real.text() }, { status: none.status, body: await none.text() }, { real: ended.session_id, ghost });
    expect(real.status).toBe(404);
  }, 60_000);

  it('answers a WebSocket path that is not valid percent-encoding with 400, and the service lives on', async () => {
    // Decoding it used to throw in the upgrade listener: uncaught, one request ended the process.
    const answer = await upgradeAnswer(`${wsBase()}/browsers/%E0%A4%A/cdp?token=x`);
    expect(answer.status).toBe(400);
    expect(JSON.parse(answer.body)).toMatchObject({ code: 'invalid_path' });
    expect((await fetch(`${app.url}/healthz`)).status).toBe(200);
  });
});

// ---- a pool lease: the session's token names the lease ------------------------------------

describe('pool lease tokens', () => {
  it('refuses a released lease’s token on every path, also while the next lease holds the browser, whose token works', async () => {
    const created = await victimApi.post('/browser_pools', { name: `tokens-${Date.now()}`, size: 1, headless: true, fill_rate_per_minute: 6000, timeout_seconds: 600 });
    expect(created.status, created.text).toBe(200);
    const pool = created.body.id as string;
    try {
      await eventually(async () => ((await victimApi.get(`/browser_pools/${pool}`)).body.available_count === 1 ? true : undefined), { timeoutMs: 90_000, intervalMs: 200, what: 'the pool to fill' });
      const acquire = async () => {
        const res = await victimApi.post(`/browser_pools/${pool}/acquire`, { acquire_timeout_seconds: 60 });
        expect(res.status, res.text).toBe(200);
        return res.body as Session;
      };
      const first = await acquire();
      const firstToken = tokenOf(first.cdp_ws_url);
      expect((await sessionAnswer('cdp', first.session_id, firstToken)).status).toBe(101);
      expect((await victimApi.post(`/browser_pools/${pool}/release`, { session_id: first.session_id })).status).toBe(204);
      const ghost = ghostOf(first.session_id);
      const refusedEverywhere = async (when: string) => {
        for (const kind of KINDS) {
          const real = await sessionAnswer(kind, first.session_id, firstToken);
          expect(real.status, `${kind} ${when}`).toBe(403);
          expectSameRefusal(`${kind} ${when}`, real, await sessionAnswer(kind, ghost, firstToken), { real: first.session_id, ghost });
        }
      };
      await refusedEverywhere('once released');

      const second = await acquire();
      expect(second.session_id).toBe(first.session_id);
      await refusedEverywhere('while the next lease holds it');
      const secondToken = tokenOf(second.cdp_ws_url);
      expect(secondToken).not.toBe(firstToken);
      const cdp = await firstFrame(second.cdp_ws_url, JSON.stringify({ id: 7, method: 'Browser.getVersion' }));
      expect(JSON.parse(cdp.data.toString())).toMatchObject({ id: 7, result: { product: expect.stringMatching(/Chrome/) } });
      expect((await sessionAnswer('live', second.session_id, secondToken)).status).toBe(409); // headless: past the token check
      expect((await victimApi.post(`/browser_pools/${pool}/release`, { session_id: second.session_id })).status).toBe(204);
    } finally {
      await victimApi.delete(`/browser_pools/${pool}`, { force: true });
    }
  }, 120_000);
});

// ---- the agent's profile token: /internal/browsers/{id}/profile ----------------------------

describe('profile archive tokens', () => {
  it('refuses every bad token on GET and PUT exactly as for a session that does not exist, stores nothing, and the agent’s token works', async () => {
    const own = await issuedToken(app, victim.session_id, 'profile');
    const tar = rawTar([{ path: 'Default/planted.txt', body: 'written with a token that was not the agent’s' }]);
    const archive = async (method: 'GET' | 'PUT', sessionId: string, token: string | undefined): Promise<Answer> => {
      const query = token === undefined ? '' : `?token=${encodeURIComponent(token)}`;
      const res = await fetch(`${app.url}/internal/browsers/${sessionId}/profile${query}`, {
        method,
        ...(method === 'PUT' ? { body: tar, headers: { 'content-type': 'application/x-tar' } } : {}),
      });
      return { status: res.status, body: await res.text() };
    };
    const before = await rowOf(app.deps.db, 'profiles', victimProfileId);
    const ghost = ghostOf(victim.session_id);
    for (const method of ['GET', 'PUT'] as const) {
      for (const c of badTokens('profile', () => own)) {
        const target = c.on?.() ?? victim.session_id;
        const real = await archive(method, target, await c.token(target));
        expect(real.status, `${method}, ${c.name}`).toBe(c.status);
        expectSameRefusal(`${method}, ${c.name}`, real, await archive(method, ghost, await c.token(ghost)), { real: target, ghost });
      }
    }
    expect(await rowOf(app.deps.db, 'profiles', victimProfileId)).toEqual(before);
    // Nothing was stored: the agent's own token still reads an empty profile.
    expect((await archive('GET', victim.session_id, own)).status).toBe(204);

    const saved = await archive('PUT', victim.session_id, own);
    expect(saved.status, saved.body).toBe(200);
    expect((await archive('GET', victim.session_id, own)).status).toBe(200);
  }, 60_000);
});

// ---- the hosted login page: handoff code, then the page cookie -----------------------------

describe('the hosted login page', () => {
  it('refuses every bad handoff code and page cookie exactly as for a flow that does not exist, changes nothing, then the good ones work until the flow ends', async () => {
    const [flow, otherOrgFlow, otherProjectFlow] = await Promise.all([startLogin(victimApi), startLogin(otherOrgApi), startLogin(otherProjectApi)]);
    const ghost = ghostOf(flow.flowId);
    // What a code or cookie could change (the driver moves the rest as the login goes on).
    const credentialState = async (flowId: string) =>
      (
        await app.deps.db.query('SELECT handoff_hash, handoff_used_at, page_token_hash, pending_input, input_seq, expires_at FROM auth_flows WHERE id = $1', [flowId])
      ).rows[0] as Record<string, unknown>;
    const flowRow = () => credentialState(flow.flowId);
    const submission = { field_values: { username: USERNAME, password: PASSWORD } };

    // The page itself needs no credential and is the same for any flow id, existing or not.
    const pageOf = async (flowId: string): Promise<Answer> => {
      const res = await fetch(`${app.url}/auth/hosted/${flowId}`);
      return { status: res.status, body: await res.text() };
    };
    const shown = await pageOf(flow.flowId);
    expect(shown.status).toBe(200);
    expect(await pageOf(ghost)).toEqual({ status: 200, body: shown.body.split(flow.flowId).join(ghost) });

    const badCodes: Array<{ name: string; body: (flowId: string) => unknown; status: number; on?: string }> = [
      { name: 'no code', body: () => ({}), status: 400 },
      { name: 'a malformed code', body: () => ({ code: 'x' }), status: 403 },
      { name: 'a well-formed random code', body: () => ({ code: randomBytes(32).toString('base64url') }), status: 403 },
      { name: 'another org’s flow’s code', body: () => ({ code: otherOrgFlow.code }), status: 403 },
      { name: 'another project’s flow’s code', body: () => ({ code: otherProjectFlow.code }), status: 403 },
      { name: 'the code moved to another org’s flow', body: () => ({ code: flow.code }), status: 403, on: otherOrgFlow.flowId },
    ];
    const before = await flowRow();
    const otherBefore = await credentialState(otherOrgFlow.flowId);
    const refuseCodes = async (cases: typeof badCodes, when: string) => {
      for (const c of cases) {
        const target = c.on ?? flow.flowId;
        const real = await exchange(target, c.body(target));
        expect(real.status, `${c.name} ${when}`).toBe(c.status);
        expect(real.cookie, c.name).toBeUndefined();
        expectSameRefusal(`exchange, ${c.name} ${when}`, real, await exchange(ghost, c.body(ghost)), { real: target, ghost });
      }
    };
    await refuseCodes(badCodes, '');
    expect(await credentialState(otherOrgFlow.flowId)).toEqual(otherBefore);

    // Their holders use their codes: a used code, and other flows' cookies, come from this.
    const otherProjectPage = await exchange(otherProjectFlow.flowId, { code: otherProjectFlow.code });
    expect(otherProjectPage.status, otherProjectPage.body).toBe(200);
    await refuseCodes(
      [
        { name: 'another project’s flow’s code, used', body: () => ({ code: otherProjectFlow.code }), status: 403 },
        { name: 'a used code on its own flow', body: () => ({ code: otherProjectFlow.code }), status: 403, on: otherProjectFlow.flowId },
      ],
      'once used',
    );
    // An expired flow's unused code (its expiry moved into the past for a moment, as time would);
    // the same code works once the expiry is back, so the expiry alone refused it.
    const setExpiry = (at: unknown) => app.deps.db.query('UPDATE auth_flows SET expires_at = $2 WHERE id = $1', [otherOrgFlow.flowId, at]);
    await setExpiry(new Date(Date.now() - 1000));
    const expired = await exchange(otherOrgFlow.flowId, { code: otherOrgFlow.code });
    await setExpiry(otherBefore.expires_at);
    expect(expired.status).toBe(403);
    expectSameRefusal('exchange, an expired flow’s code', expired, await exchange(ghost, { code: otherOrgFlow.code }), { real: otherOrgFlow.flowId, ghost });
    const otherOrgPage = await exchange(otherOrgFlow.flowId, { code: otherOrgFlow.code });
    expect(otherOrgPage.status, otherOrgPage.body).toBe(200);
    expect(await flowRow(), 'a wrong code neither uses nor burns the real one').toEqual(before);

    // The good code, once: the page cookie, scoped to this flow's path.
    const page = await exchange(flow.flowId, { code: flow.code });
    expect(page.status, page.body).toBe(200);
    expect(page.cookie).toMatch(/^[A-Za-z0-9_-]{43}$/);
    const cookie = page.cookie!;

    const badCookies: Array<{ name: string; cookie: string | undefined; on?: string }> = [
      { name: 'no cookie', cookie: undefined },
      { name: 'a malformed cookie', cookie: 'x' },
      { name: 'a well-formed random cookie', cookie: randomBytes(32).toString('base64url') },
      { name: 'another org’s flow’s cookie', cookie: otherOrgPage.cookie },
      { name: 'another project’s flow’s cookie', cookie: otherProjectPage.cookie },
      { name: 'the cookie moved to another org’s flow', cookie, on: otherOrgFlow.flowId },
    ];
    const withCookie = await flowRow();
    for (const route of ['state', 'events', 'submit'] as const) {
      for (const c of badCookies) {
        const target = c.on ?? flow.flowId;
        const real = await pageAnswer(route, target, c.cookie, submission);
        expect(real.status, `${route}, ${c.name}`).toBe(401);
        expect(JSON.parse(real.body)).toMatchObject({ code: 'hosted_session_required' });
        expectSameRefusal(`${route}, ${c.name}`, real, await pageAnswer(route, ghost, c.cookie, submission), { real: target, ghost });
      }
    }
    expect(await flowRow(), 'no refused submit reached the flow').toEqual(withCookie);

    // The good cookie reads the flow and answers its step; the login then succeeds.
    const state = await pageAnswer('state', flow.flowId, cookie);
    expect(state.status).toBe(200);
    expect(JSON.parse(state.body)).toMatchObject({ flow_id: flow.flowId, domain: sites.domain('single') });
    expect((await pageAnswer('events', flow.flowId, cookie)).status).toBe(200);
    const step = await eventually(
      async () => {
        const body = JSON.parse((await pageAnswer('state', flow.flowId, cookie)).body) as { flow_step: string; flow_status: string; fields?: Array<{ id: string; type: string }> };
        if (body.flow_status !== 'IN_PROGRESS') throw new Error(`the flow ended before its form: ${JSON.stringify(body)}`);
        return body.flow_step === 'AWAITING_INPUT' ? body : undefined;
      },
      { timeoutMs: 90_000, intervalMs: 200, what: 'the login form' },
    );
    const fieldId = (type: string) => step.fields!.find((f) => f.type === type)!.id;
    const answer = { field_values: { [fieldId('identifier')]: USERNAME, [fieldId('password')]: PASSWORD } };
    const submitted = await pageAnswer('submit', flow.flowId, cookie, answer);
    expect(submitted.status, submitted.body).toBe(200);
    expect(JSON.parse(submitted.body)).toEqual({ accepted: true });
    await eventually(async () => ((await victimApi.get(`/auth/connections/${flow.connectionId}`)).body.flow_status === 'SUCCESS' ? true : undefined), { timeoutMs: 90_000, intervalMs: 200, what: 'the login to succeed' });

    // After the end: the code is refused as for a flow that never was; the cookie may read
    // the outcome (the page shows it) but not answer anything, and shows no browser.
    expectSameRefusal('exchange after the end', await exchange(flow.flowId, { code: flow.code }), await exchange(ghost, { code: flow.code }), { real: flow.flowId, ghost });
    const ended = await flowRow();
    const late = await pageAnswer('submit', flow.flowId, cookie, answer);
    expect(late.status).toBe(409);
    expect(JSON.parse(late.body)).toMatchObject({ code: 'flow_not_running' });
    expect(await flowRow()).toEqual(ended);
    const outcome = JSON.parse((await pageAnswer('state', flow.flowId, cookie)).body) as { flow_status: string; live_view_url?: string | null };
    expect(outcome.flow_status).toBe('SUCCESS');
    expect(outcome.live_view_url ?? null).toBeNull();

    for (const [api, f] of [
      [victimApi, flow],
      [otherOrgApi, otherOrgFlow],
      [otherProjectApi, otherProjectFlow],
    ] as const) {
      await api.delete(`/auth/connections/${f.connectionId}`);
    }
  }, 180_000);
});

// ---- the agent's own port ------------------------------------------------------------------

describe('the agent’s port', () => {
  it('listens on 127.0.0.1 only and is named in no API answer', async () => {
    // Besides its token (agent-isolation.test.ts): reachable only from this host, and its
    // address is never handed out.
    const agentUrl = new URL((await readyBrowser(app.runtime, victim.session_id)).agentUrl!);
    expect(agentUrl.hostname).toBe('127.0.0.1');
    const reachable = (host: string) =>
      new Promise<boolean>((resolve) => {
        const socket = net.connect({ host, port: Number(agentUrl.port) }, () => {
          socket.destroy();
          resolve(true);
        });
        socket.on('error', () => resolve(false));
      });
    expect(await reachable('127.0.0.1')).toBe(true);
    expect(await reachable('127.0.0.2')).toBe(false);
    for (const path of [`/browsers/${victim.session_id}`, '/browsers']) {
      const res = await victimApi.get(path);
      expect(res.status).toBe(200);
      expect(res.text).not.toContain(`:${agentUrl.port}`);
    }
  });
});
