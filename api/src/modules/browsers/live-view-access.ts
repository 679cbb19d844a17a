import type { CdpTokens, TokenCheck } from './cdp-token.js';

/**
 * Who may do what with a session's live view, decided only by what the service signed.
 *
 * `browser_live_view_url` carries the token of cdp_ws_url: full control. Kernel's
 * `readOnly=true` on that URL asks for a view without input; a query parameter is the
 * client's to drop, so the page answers it with a redirect to the same page under a token
 * of its own purpose (`live_view_read_only`), which the VNC proxy only ever serves
 * view-only (x11vnc -viewonly on the agent) and which opens nothing else (not CDP, not
 * WebDriver, not a full live view). Whoever is handed that URL cannot get input back by
 * editing it. `readOnly=true` with a full token on the WebSocket is also honoured: a
 * client may always give up input, never gain it.
 */

export type LiveViewAccess = { check: 'ok'; readOnly: boolean } | { check: Exclude<TokenCheck, 'ok'> };

export const READ_ONLY_PURPOSE = 'live_view_read_only';

/** A full (cdp) token first; failing its signature, a read-only one. */
export async function checkLiveViewToken(tokens: CdpTokens, subject: string, token: string): Promise<LiveViewAccess> {
  const full = await tokens.verify(subject, token);
  if (full === 'ok') return { check: 'ok', readOnly: false };
  if (full !== 'bad_signature') return { check: full };
  const readOnly = await tokens.verify(subject, token, READ_ONLY_PURPOSE);
  return readOnly === 'ok' ? { check: 'ok', readOnly: true } : { check: readOnly };
}

/** What a cdp-purpose check grants: full control or nothing. */
export const fullAccess = (check: TokenCheck): LiveViewAccess => (check === 'ok' ? { check, readOnly: false } : { check });

/** `readOnly=true` as Kernel's live view takes it (also `1`, any case). */
export function asksReadOnly(value: string | null | undefined): boolean {
  return value !== null && value !== undefined && /^(true|1)$/i.test(value);
}
