import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { AppDeps } from '../../app-deps.js';

/**
 * The token in cdp_ws_url: `<expiry unix seconds>.<HMAC-SHA256(key, "cdp:<session id>:<expiry>")>`.
 * Short-lived (an hour, renewed by every read of the session), bound to one session, and
 * carried as `token`, never `jwt`: a jwt parameter would make the SDK reroute calls to a
 * base_url (CONTRACT §12.7).
 *
 * The key is generated once, sealed with the encryption key, and kept in service_keys, so
 * every replica and every restart signs and verifies with the same key.
 */
export const CDP_TOKEN_TTL_MS = 60 * 60 * 1000;
const KEY_NAME = 'cdp-token-v1';
const SEAL_CONTEXT = `service_keys:${KEY_NAME}`;

export type TokenCheck = 'ok' | 'malformed' | 'expired' | 'bad_signature';

export interface CdpTokens {
  issue(sessionId: string): Promise<{ token: string; expiresAt: Date }>;
  verify(sessionId: string, token: string): Promise<TokenCheck>;
}

export function createCdpTokens(deps: Pick<AppDeps, 'db' | 'sealer' | 'clock'>): CdpTokens {
  let key: Promise<Buffer> | undefined;
  const loadKey = () => {
    key ??= loadOrCreateKey(deps).catch((error: unknown) => {
      key = undefined;
      throw error;
    });
    return key;
  };
  const sign = (k: Buffer, sessionId: string, expiry: number) =>
    createHmac('sha256', k).update(`cdp:${sessionId}:${expiry}`).digest();
  return {
    async issue(sessionId) {
      const expiry = Math.floor((deps.clock.now().getTime() + CDP_TOKEN_TTL_MS) / 1000);
      const mac = sign(await loadKey(), sessionId, expiry);
      return { token: `${expiry}.${mac.toString('base64url')}`, expiresAt: new Date(expiry * 1000) };
    },
    async verify(sessionId, token) {
      const match = /^(\d{1,12})\.([A-Za-z0-9_-]{43})$/.exec(token);
      if (!match) return 'malformed';
      const expiry = Number(match[1]);
      const expected = sign(await loadKey(), sessionId, expiry);
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
