import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { AppDeps } from '../../app-deps.js';

/**
 * The token in cdp_ws_url: `<expiry unix seconds>.<HMAC-SHA256(key, "<purpose>:<session id>:<expiry>")>`.
 * Short-lived (an hour, renewed by every read of the session), bound to one session, and
 * carried as `token`, never `jwt`: a jwt parameter would make the SDK reroute calls to a
 * base_url (CONTRACT §12.7).
 *
 * The purpose is part of what is signed, so a token minted for one use is refused by every
 * other: a client's CDP token cannot fetch or overwrite the session's profile, and the
 * agent's profile token cannot open CDP. `cdp` tokens sign exactly what they signed before
 * purposes existed, so URLs handed out earlier stay valid.
 *
 * The key is generated once, sealed with the encryption key, and kept in service_keys, so
 * every replica and every restart signs and verifies with the same key.
 */
/**
 * What a session's client tokens are bound to. A pool's browser outlives its leases, so
 * its tokens name the lease too: once released (idle) or leased again, the previous
 * holder's URLs are refused. Other sessions sign their bare id, as they always have.
 */
export function tokenSubject(row: { id: string; pool_id: string | null; leased_at: Date | null; lease_seq: number }): string {
  if (row.pool_id === null) return row.id;
  return `${row.id}~${row.leased_at === null ? 'idle' : row.lease_seq}`;
}

export const CDP_TOKEN_TTL_MS = 60 * 60 * 1000;
/**
 * The agent's profile archive URL is minted once, at launch, and used again when the
 * session ends, which may be long after: timeout_seconds (up to 259200 s) bounds idleness,
 * not lifetime, so a busy session can outlive any idle limit. The expiry is only a backstop
 * (30 days); what really bounds the token is the session: the archive routes refuse it as
 * soon as the session has ended.
 */
export const PROFILE_TOKEN_TTL_MS = 30 * 24 * 60 * 60 * 1000;

/**
 * A recording's upload token (modules/replays) is bound to the replay id, not the session,
 * and used once, when the recording ends (at its max duration at the latest, a day at
 * most): two days is the backstop; the side door refuses it once the replay has ended.
 */
export const REPLAY_TOKEN_TTL_MS = 2 * 24 * 60 * 60 * 1000;

/**
 * A recording's replay_view_url (modules/replays/view.ts) lets whoever holds it watch that
 * one video without an API key: an hour, like cdp_ws_url, renewed by every list.
 */
export const REPLAY_VIEW_TOKEN_TTL_MS = 60 * 60 * 1000;

/** What a token may be used for; each purpose has its own lifetime. */
export type TokenPurpose = 'cdp' | 'profile' | 'replay' | 'replay_view' | 'telemetry' | 'extension' | 'live_view_read_only';
/** The agent fetches its extensions once, at start (a pod may wait a while to be scheduled). */
export const EXTENSION_TOKEN_TTL_MS = 24 * 60 * 60 * 1000;
/** The agent's telemetry side door (browser-telemetry module) is bounded like the profile's: by the session, the expiry a backstop. */
const TTL_MS: Record<TokenPurpose, number> = {
  cdp: CDP_TOKEN_TTL_MS,
  profile: PROFILE_TOKEN_TTL_MS,
  replay: REPLAY_TOKEN_TTL_MS,
  replay_view: REPLAY_VIEW_TOKEN_TTL_MS,
  telemetry: PROFILE_TOKEN_TTL_MS,
  extension: EXTENSION_TOKEN_TTL_MS,
  // A read-only live view link (live-view-access.ts) is derived from cdp_ws_url's token and lives as long.
  live_view_read_only: CDP_TOKEN_TTL_MS,
};
const KEY_NAME = 'cdp-token-v1';
const SEAL_CONTEXT = `service_keys:${KEY_NAME}`;

export type TokenCheck = 'ok' | 'malformed' | 'expired' | 'bad_signature';

export interface CdpTokens {
  issue(sessionId: string, purpose?: TokenPurpose): Promise<{ token: string; expiresAt: Date }>;
  verify(sessionId: string, token: string, purpose?: TokenPurpose): Promise<TokenCheck>;
}

/**
 * The signing key, loaded once per database pool: every CdpTokens instance of an app (the
 * routes, the WebSocket proxy, the live view, profile archives, each create with a
 * profile) shares it instead of reading it again.
 */
const keys = new WeakMap<object, Promise<Buffer>>();

export function createCdpTokens(deps: Pick<AppDeps, 'db' | 'sealer' | 'clock'>): CdpTokens {
  const loadKey = () => {
    let key = keys.get(deps.db);
    if (!key) {
      key = loadOrCreateKey(deps).catch((error: unknown) => {
        keys.delete(deps.db);
        throw error;
      });
      keys.set(deps.db, key);
    }
    return key;
  };
  const sign = (k: Buffer, purpose: TokenPurpose, sessionId: string, expiry: number) =>
    createHmac('sha256', k).update(`${purpose}:${sessionId}:${expiry}`).digest();
  return {
    async issue(sessionId, purpose = 'cdp') {
      const expiry = Math.floor((deps.clock.now().getTime() + TTL_MS[purpose]) / 1000);
      const mac = sign(await loadKey(), purpose, sessionId, expiry);
      return { token: `${expiry}.${mac.toString('base64url')}`, expiresAt: new Date(expiry * 1000) };
    },
    async verify(sessionId, token, purpose = 'cdp') {
      const match = /^(\d{1,12})\.([A-Za-z0-9_-]{43})$/.exec(token);
      if (!match) return 'malformed';
      const expiry = Number(match[1]);
      const expected = sign(await loadKey(), purpose, sessionId, expiry);
      const given = Buffer.from(match[2]!, 'base64url');
      if (given.length !== expected.length || !timingSafeEqual(given, expected)) return 'bad_signature';
      return expiry * 1000 > deps.clock.now().getTime() ? 'ok' : 'expired';
    },
  };
}

async function loadOrCreateKey(deps: Pick<AppDeps, 'db' | 'sealer' | 'clock'>): Promise<Buffer> {
  const fresh = deps.sealer.seal(randomBytes(32).toString('base64'), SEAL_CONTEXT);
  // Two replicas may race on the first start: the first insert wins and both read it.
  await deps.db.query('INSERT INTO service_keys (name, sealed, created_at) VALUES ($1, $2, $3) ON CONFLICT (name) DO NOTHING', [
    KEY_NAME,
    fresh,
    deps.clock.now(),
  ]);
  const { rows } = await deps.db.query<{ sealed: string }>('SELECT sealed FROM service_keys WHERE name = $1', [KEY_NAME]);
  return Buffer.from(deps.sealer.open(rows[0]!.sealed, SEAL_CONTEXT), 'base64');
}
