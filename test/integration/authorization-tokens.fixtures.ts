import { createHmac, randomBytes } from 'node:crypto';
import http from 'node:http';
import { expect } from 'vitest';
import WebSocket, { type RawData } from 'ws';
import type { Queryable } from '../../api/src/db/pool.js';
import { CDP_TOKEN_TTL_MS, createCdpTokens, EXTENSION_TOKEN_TTL_MS, PROFILE_TOKEN_TTL_MS, REPLAY_TOKEN_TTL_MS, REPLAY_VIEW_TOKEN_TTL_MS, type TokenPurpose } from '../../api/src/modules/browsers/cdp-token.js';
import { newId } from '../../api/src/ids.js';
import type { LoginSites } from '../fixtures/login-sites/server.js';
import type { HttpClient } from '../support/http.js';
import type { TestApp } from '../support/test-app.js';

/**
 * Helpers for authorization-tokens.test.ts: what a route answered, tokens as an attacker
 * could make them, and the comparisons that show a refusal tells nothing about existence.
 */

/** What a route answered: the status and the body as text (a WebSocket that opened is 101). */
export interface Answer {
  status: number;
  body: string;
}

/**
 * A WebSocket upgrade sent by hand, so a refusal's status and body can be read whole
 * (ws only reports the status). An upgrade that succeeds is closed at once.
 */
export function upgradeAnswer(url: string): Promise<Answer> {
  const target = new URL(url);
  return new Promise((resolve, reject) => {
    const req = http.request({
      host: target.hostname,
      port: target.port,
      path: `${target.pathname}${target.search}`,
      headers: { Connection: 'Upgrade', Upgrade: 'websocket', 'Sec-WebSocket-Version': '13', 'Sec-WebSocket-Key': randomBytes(16).toString('base64') },
      timeout: 30_000,
    });
    req.on('upgrade', (res, socket) => {
      socket.destroy();
      resolve({ status: res.statusCode ?? 0, body: '' });
    });
    req.on('response', (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`no answer from ${target.pathname}`)));
    req.on('error', reject);
    req.end();
  });
}

/** `<expiry>.<mac>` exactly as cdp-token.ts builds it, but under a key of the caller's choice. */
export function tokenSignedWith(key: Buffer, purpose: TokenPurpose, subject: string, expirySeconds: number): string {
  const mac = createHmac('sha256', key).update(`${purpose}:${subject}:${expirySeconds}`).digest('base64url');
  return `${expirySeconds}.${mac}`;
}

const inAnHour = () => Math.floor(Date.now() / 1000) + 3600;

/** A token in the right form, for the right subject and purpose, signed with a key that is not the service's. */
export const foreignKeyToken = (subject: string, purpose: TokenPurpose = 'cdp') => tokenSignedWith(randomBytes(32), purpose, subject, inAnHour());

const LIFETIME_MS: Record<TokenPurpose, number> = {
  cdp: CDP_TOKEN_TTL_MS,
  profile: PROFILE_TOKEN_TTL_MS,
  replay: REPLAY_TOKEN_TTL_MS,
  replay_view: REPLAY_VIEW_TOKEN_TTL_MS,
  telemetry: PROFILE_TOKEN_TTL_MS,
  extension: EXTENSION_TOKEN_TTL_MS,
  live_view_read_only: CDP_TOKEN_TTL_MS,
};

/**
 * A token the service really signed, whose expiry has passed: issued by the app's own
 * signer (same database, so the same key) on a clock set back past the purpose's lifetime.
 */
export async function expiredToken(app: TestApp, subject: string, purpose: TokenPurpose = 'cdp'): Promise<string> {
  const past = { now: () => new Date(Date.now() - LIFETIME_MS[purpose] - 60_000) };
  return (await createCdpTokens({ db: app.deps.db, sealer: app.deps.sealer, clock: past }).issue(subject, purpose)).token;
}

/** A token the service signed now (what the agent holds for 'profile', or what a read hands out for 'cdp'). */
export async function issuedToken(app: TestApp, subject: string, purpose: TokenPurpose = 'cdp'): Promise<string> {
  return (await createCdpTokens(app.deps).issue(subject, purpose)).token;
}

/** The same valid MAC under another expiry: what editing the expiry in a URL gives. */
export function withEditedExpiry(token: string): string {
  const [expiry, mac] = token.split('.');
  return `${Number(expiry) + 86_400}.${mac}`;
}

/** An id of the same kind and length as `id` that names nothing. */
export function ghostOf(id: string): string {
  const ghost = newId(id.slice(0, id.indexOf('_')));
  expect(ghost).toHaveLength(id.length);
  return ghost;
}

/**
 * The refusal at `real` must be the refusal at a `ghost` that exists nowhere, byte for
 * byte once the ids are swapped back: status, code, message, details.
 */
export function expectSameRefusal(what: string, real: Answer, ghost: Answer, ids: { real: string; ghost: string }): void {
  expect(real.status, `${what}: ${real.body}`).toBeGreaterThanOrEqual(400);
  expect({ status: ghost.status, body: ghost.body.split(ids.ghost).join(ids.real) }, what).toEqual(real);
}

/** The whole row, to show a refused request changed nothing. */
export async function rowOf(db: Queryable, table: 'browser_sessions' | 'profiles' | 'auth_flows' | 'auth_connections', id: string) {
  const { rows } = await db.query(`SELECT * FROM ${table} WHERE id = $1`, [id]);
  return rows[0] as Record<string, unknown> | undefined;
}

/** Opens a WebSocket, sends `message` (if any) and resolves with the first frame it receives. */
export function firstFrame(url: string, message?: string, timeoutMs = 60_000): Promise<{ data: Buffer; binary: boolean }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { perMessageDeflate: false, handshakeTimeout: timeoutMs });
    const timer = setTimeout(() => {
      ws.terminate();
      reject(new Error(`no frame from ${new URL(url).pathname} within ${timeoutMs} ms`));
    }, timeoutMs);
    ws.once('open', () => {
      if (message !== undefined) ws.send(message);
    });
    ws.once('message', (data: RawData, binary: boolean) => {
      clearTimeout(timer);
      ws.close();
      resolve({ data: Buffer.isBuffer(data) ? data : Buffer.from(data as ArrayBuffer), binary });
    });
    ws.once('unexpected-response', (_req, res) => {
      clearTimeout(timer);
      reject(new Error(`${new URL(url).pathname} refused: ${res.statusCode}`));
    });
    ws.once('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
  });
}

/** The hosted page's cookie from a Set-Cookie answer. */
export function hostedCookie(res: Response): string | undefined {
  for (const line of res.headers.getSetCookie()) {
    const match = /^bp_hosted=([^;]*)/.exec(line);
    if (match) return match[1];
  }
  return undefined;
}

export type Kind = 'cdp' | 'webdriver' | 'vnc' | 'live';

/** A session's URL of this kind with this token (none when undefined), as the client would use it. */
export async function sessionTokenAnswer(base: string, kind: Kind, sessionId: string, token: string | undefined): Promise<Answer> {
  const query = token === undefined ? '' : `?token=${encodeURIComponent(token)}`;
  if (kind !== 'live') return upgradeAnswer(`${base.replace(/^http/, 'ws')}/browsers/${sessionId}/${kind}${query}`);
  const res = await fetch(`${base}/browsers/${sessionId}/live${query}`);
  return { status: res.status, body: await res.text() };
}

export interface Flow {
  connectionId: string;
  flowId: string;
  code: string;
}

/** A connection to the fixture's single-page site and a login started on it: the flow's id and handoff code. */
export async function startSiteLogin(api: HttpClient, sites: LoginSites): Promise<Flow> {
  const created = await api.post('/auth/connections', {
    domain: sites.domain('single'),
    profile_name: `tokens-${randomBytes(4).toString('hex')}`,
    login_url: sites.url('single', '/login'),
    health_checks: false,
  });
  expect(created.status, created.text).toBe(200);
  const login = await api.post(`/auth/connections/${created.body.id}/login`, {});
  expect(login.status, login.text).toBe(200);
  return { connectionId: created.body.id, flowId: login.body.id, code: new URL(login.body.hosted_url).hash.replace(/^#code=/, '') };
}

/** POST …/session: the handoff code exchanged for the page cookie (when it is). */
export async function exchangeCode(base: string, flowId: string, body: unknown): Promise<Answer & { cookie?: string }> {
  const res = await fetch(`${base}/auth/hosted/${flowId}/session`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const cookie = hostedCookie(res);
  return { status: res.status, body: await res.text(), ...(cookie ? { cookie } : {}) };
}

export type PageRoute = 'state' | 'events' | 'submit';
/** One of the page's own routes with this cookie (none when undefined). */
export async function hostedPageAnswer(base: string, route: PageRoute, flowId: string, cookie: string | undefined, submission: unknown = {}): Promise<Answer> {
  const headers: Record<string, string> = cookie === undefined ? {} : { cookie: `bp_hosted=${cookie}` };
  const init: RequestInit =
    route === 'submit' ? { method: 'POST', headers: { ...headers, 'content-type': 'application/json' }, body: JSON.stringify(submission) } : { headers };
  const controller = new AbortController();
  const res = await fetch(`${base}/auth/hosted/${flowId}/${route}`, { ...init, signal: controller.signal });
  // A stream that opened is not read: its status says enough.
  if ((res.headers.get('content-type') ?? '').startsWith('text/event-stream')) {
    controller.abort();
    return { status: res.status, body: '' };
  }
  return { status: res.status, body: await res.text() };
}
