import type { IncomingMessage } from 'node:http';
import type { AppDeps } from '../../app-deps.js';
import { tokenSubject, type CdpTokens } from './cdp-token.js';
import { liveViewPath } from './live-view.js';
import type { SessionRow } from './store.js';

const HOST = /^[A-Za-z0-9.-]+(:\d{1,5})?$|^\[[0-9A-Fa-f:.]+\](:\d{1,5})?$/;

/**
 * ws(s)://host of the service as clients reach it: BROWSERPLANE_PUBLIC_URL when set, else
 * the request's Host header and X-Forwarded-Proto (a reverse proxy terminating TLS sets it).
 */
export function publicWsBase(deps: AppDeps, req?: IncomingMessage): string {
  const configured = deps.settings.publicUrl;
  if (configured) return configured.replace(/^http/, 'ws').replace(/\/+$/, '');
  const host = req?.headers.host;
  const forwarded = req?.headers['x-forwarded-proto'];
  const proto = (Array.isArray(forwarded) ? forwarded[0] : forwarded)?.split(',')[0]?.trim().toLowerCase();
  const secure = proto === 'https' || (proto === undefined && req !== undefined && 'encrypted' in req.socket);
  return `${secure ? 'wss' : 'ws'}://${host && HOST.test(host) ? host : 'localhost'}`;
}

/** What newer SDKs get when the service names no region: Kernel's own default. */
export const DEFAULT_REGION = 'us-east';
export const regionOf = (settings: AppDeps['settings']): string => settings.region ?? DEFAULT_REGION;

/**
 * Hosted Kernel sizes memory by plan; a browser here gets what its host or pod gives it,
 * so the size newer SDKs require is reported as Kernel's default for the kind of browser.
 */
export const reportedMemory = (headless: boolean): '1GiB' | '8GiB' => (headless ? '1GiB' : '8GiB');

export interface PresentContext {
  tokens: CdpTokens;
  wsBase: string;
  now: Date;
  /** The configured region (regionOf); DEFAULT_REGION when absent. */
  region?: string | undefined;
}

/** The BrowserSession object (CONTRACT §1.1); optional fields are absent rather than null. */
export async function presentSession(ctx: PresentContext, row: SessionRow) {
  const { token } = await ctx.tokens.issue(tokenSubject(row));
  const path = `${ctx.wsBase}/browsers/${encodeURIComponent(row.id)}`;
  const end = row.deleted_at ?? ctx.now;
  return {
    session_id: row.id,
    cdp_ws_url: `${path}/cdp?token=${token}`,
    webdriver_ws_url: `${path}/webdriver?token=${token}`,
    // The live view page is opened over http(s) on the same host as the WebSockets.
    ...(row.headless ? {} : { browser_live_view_url: `${ctx.wsBase.replace(/^ws/, 'http')}${liveViewPath(row.id)}?token=${token}` }),
    created_at: row.created_at.toISOString(),
    headless: row.headless,
    stealth: row.stealth,
    gpu: row.gpu,
    kiosk_mode: row.kiosk_mode,
    timeout_seconds: row.timeout_seconds,
    region: ctx.region ?? DEFAULT_REGION,
    memory: reportedMemory(row.headless),
    ...(row.name !== null ? { name: row.name } : {}),
    ...(row.pool_id !== null ? { pool: { id: row.pool_id, ...(row.pool_name !== null ? { name: row.pool_name } : {}) } } : {}),
    ...(row.start_url !== null ? { start_url: row.start_url } : {}),
    ...(row.proxy_id !== null ? { proxy_id: row.proxy_id } : {}),
    ...(row.profile_id !== null
      ? {
          profile: {
            id: row.profile_id,
            name: row.profile_name,
            created_at: row.profile_created_at!.toISOString(),
            updated_at: row.profile_updated_at!.toISOString(),
            ...(row.profile_last_used_at ? { last_used_at: row.profile_last_used_at.toISOString() } : {}),
          },
        }
      : {}),
    viewport: { width: row.viewport_width, height: row.viewport_height, refresh_rate: row.viewport_refresh_rate },
    ...(Object.keys(row.chrome_policy).length > 0 ? { chrome_policy: row.chrome_policy } : {}),
    tags: row.tags,
    telemetry: row.telemetry,
    usage: { uptime_ms: row.started_at ? Math.max(0, end.getTime() - row.started_at.getTime()) : 0 },
    ...(row.deleted_at ? { deleted_at: row.deleted_at.toISOString() } : {}),
  };
}

export type BrowserSession = Awaited<ReturnType<typeof presentSession>>;
