import { randomBytes } from 'node:crypto';
import type { Request } from 'express';
import { z } from 'zod';
import type { AppDeps } from '../../../app-deps.js';
import { AppError } from '../../../http/errors.js';
import { defineRoute, json, type RouteDef } from '../../../http/route.js';
import { lookupText } from '../../../http/schemas.js';
import { errorResponses } from '../../../http/standard-responses.js';
import { createRowFollower } from '../../../events/follow-row.js';
import { followFlow } from '../events.js';
import { submitBody, submitResponseSchema } from '../schema.js';
import { sha256, viewContext } from '../service.js';
import { submitToFlow } from '../submission.js';
import { findFlow, findFlowByPageToken, useHandoff } from '../flow-store.js';
import type { FlowRow } from '../rows.js';
import { findConnectionById } from '../store.js';
import { presentStateEvent } from '../view.js';
import { HOSTED_ASSETS, HOSTED_PAGE_HEADERS, hostedPageHtml } from './page.js';

/**
 * The hosted login page (hosted_url): a page of this service a person opens to answer
 * the flow's steps without an API key. The URL carries a one-time handoff code in its
 * fragment (never sent to servers or logs); the page exchanges it for a page session, an
 * HttpOnly, SameSite=Strict cookie scoped to this flow's path that lives until the flow
 * expires. The page can read the flow's state, follow its events and submit; nothing else.
 */

const tags = ['Managed auth'];
export const HOSTED_PREFIX = '/auth/hosted';
export const HOSTED_ASSET_PREFIX = '/auth/hosted-assets';
const COOKIE = 'bp_hosted';
const params = z.object({ flow_id: lookupText.describe('The flow id (from hosted_url)') });
const exchangeBody = z.strictObject({ code: z.string().min(1).max(256).describe('The handoff_code') }).meta({ id: 'HostedHandoffRequest' });

function cookieToken(req: Request): string | undefined {
  for (const part of (req.headers.cookie ?? '').split(';')) {
    const [name, ...rest] = part.trim().split('=');
    if (name === COOKIE) return rest.join('=');
  }
  return undefined;
}

const refused = () => new AppError(401, 'hosted_session_required', 'Open the login link again: this page has no valid session for the flow');

/**
 * How long after the flow's expiry its page session still reads the outcome. The cookie's
 * Max-Age ends at the expiry, but a cookie is the browser's to keep: the server bounds
 * the session itself, so a copied cookie does not read the flow's state for ever.
 */
export const PAGE_SESSION_GRACE_MS = 5 * 60_000;

/** The flow this request's page session belongs to. */
async function pageFlow(deps: AppDeps, req: Request, flowId: string): Promise<FlowRow> {
  const token = cookieToken(req);
  if (!token || !/^[A-Za-z0-9_-]{20,100}$/.test(token)) throw refused();
  const flow = await findFlowByPageToken(deps.db, flowId, sha256(token));
  if (!flow || deps.clock.now().getTime() > flow.expires_at.getTime() + PAGE_SESSION_GRACE_MS) throw refused();
  return flow;
}

/** The page's view of the flow: the state event plus the site it is for. */
async function pageState(deps: AppDeps, req: Request, flow: FlowRow) {
  const row = await findConnectionById(deps.db, flow.connection_id);
  const event = await presentStateEvent(viewContext(deps, req), flow, deps.clock.now().toISOString());
  return { ...event, flow_id: flow.id, domain: row?.domain ?? null, flow_expires_at: flow.expires_at.toISOString() };
}

export function hostedPageRoutes(deps: AppDeps): RouteDef[] {
  // One per mount: the page's streams of the same flow share their re-reads.
  const follower = createRowFollower(deps);
  return [
    defineRoute({
      method: 'get',
      path: `${HOSTED_PREFIX}/{flow_id}`,
      operationId: 'getHostedLoginPage',
      summary: 'The hosted login page of a flow (hosted_url); authorised by the handoff code in its fragment',
      tags,
      auth: 'public',
      params,
      responses: { 200: { description: 'The page', schema: z.string(), contentType: 'text/html' } },
      handler: ({ params: p, res }) => {
        res.status(200).set(HOSTED_PAGE_HEADERS).send(hostedPageHtml(p.flow_id));
        return { kind: 'handled' };
      },
    }),
    defineRoute({
      method: 'get',
      path: `${HOSTED_ASSET_PREFIX}/{file}`,
      operationId: 'getHostedLoginAsset',
      summary: 'Script and style of the hosted login page',
      tags,
      auth: 'public',
      params: z.object({ file: lookupText.describe('The file: hosted.js or hosted.css') }),
      responses: { 200: { description: 'The file', schema: z.string(), contentType: ['text/javascript', 'text/css'] }, ...errorResponses(404) },
      handler: ({ params: p, res }) => {
        const asset = HOSTED_ASSETS[p.file];
        if (!asset) throw new AppError(404, 'not_found', `No asset ${JSON.stringify(p.file)}`);
        res.status(200).set({ 'Content-Type': asset.contentType, 'Cache-Control': 'no-cache', 'X-Content-Type-Options': 'nosniff' }).send(asset.body);
        return { kind: 'handled' };
      },
    }),
    defineRoute({
      method: 'post',
      path: `${HOSTED_PREFIX}/{flow_id}/session`,
      operationId: 'startHostedLoginSession',
      summary: 'Exchange the one-time handoff code for the page session cookie',
      tags,
      auth: 'public',
      params,
      body: exchangeBody,
      responses: { 200: { description: 'The flow’s state' }, ...errorResponses(400, 403) },
      handler: async ({ params: p, body, req, res }) => {
        const token = randomBytes(32).toString('base64url');
        const flow = await useHandoff(deps.db, p.flow_id, sha256(body.code), sha256(token), deps.clock.now());
        // One answer for every refusal: telling "ended or unknown" from "wrong code" would let
        // anyone holding a flow id without its code learn whether that login is running.
        if (!flow) throw new AppError(403, 'invalid_handoff', 'This login link has expired, was already used or is not valid');
        const maxAge = Math.max(1, Math.floor((flow.expires_at.getTime() - deps.clock.now().getTime()) / 1000));
        const secure = req.secure || req.headers['x-forwarded-proto'] === 'https';
        res.cookie(COOKIE, token, {
          httpOnly: true,
          sameSite: 'strict',
          secure,
          path: `${HOSTED_PREFIX}/${encodeURIComponent(flow.id)}`,
          maxAge: maxAge * 1000,
        });
        return json(await pageState(deps, req, flow));
      },
    }),
    defineRoute({
      method: 'get',
      path: `${HOSTED_PREFIX}/{flow_id}/state`,
      operationId: 'getHostedLoginState',
      summary: 'The flow’s current state, for the hosted page',
      tags,
      auth: 'public',
      params,
      responses: { 200: { description: 'The flow’s state' }, ...errorResponses(401) },
      handler: async ({ params: p, req }) => json(await pageState(deps, req, await pageFlow(deps, req, p.flow_id))),
    }),
    defineRoute({
      method: 'post',
      path: `${HOSTED_PREFIX}/{flow_id}/submit`,
      operationId: 'submitHostedLogin',
      summary: 'Answer the flow’s current step from the hosted page',
      tags,
      auth: 'public',
      params,
      body: submitBody,
      responses: { 200: { description: 'Whether the flow took it', schema: submitResponseSchema }, ...errorResponses(400, 401, 409) },
      handler: async ({ params: p, body, req }) => {
        const flow = await pageFlow(deps, req, p.flow_id);
        const row = await findConnectionById(deps.db, flow.connection_id);
        if (!row || row.current_flow_id !== flow.id) throw new AppError(409, 'flow_not_running', 'This login has ended');
        return json({ accepted: await submitToFlow(deps, row, body) });
      },
    }),
    defineRoute({
      method: 'get',
      path: `${HOSTED_PREFIX}/{flow_id}/events`,
      operationId: 'followHostedLogin',
      summary: 'Server-Sent Events of the flow, for the hosted page',
      tags,
      auth: 'public',
      params,
      responses: { 200: { description: 'An event stream', contentType: 'text/event-stream' }, ...errorResponses(401) },
      handler: async ({ params: p, req, res }) => {
        const flow = await pageFlow(deps, req, p.flow_id);
        const source = async () => (await findFlow(deps.db, flow.id)) ?? ('gone' as const);
        await followFlow(deps, flow.connection_id, source, viewContext(deps, req), { req, res }, { follower, sharedReadKey: `auth-flow:${flow.id}` });
        return { kind: 'handled' };
      },
    }),
  ];
}
