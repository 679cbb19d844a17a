/**
 * What the agent's capture and the API agree on beyond the wire schema, without zod (the
 * agent loads none while idle; contract/telemetry.ts re-exports these for the API).
 */

/** A monitor_screenshot's PNG (base64) is at most this long; the agent downscales, then skips, a larger one. */
export const TELEMETRY_MAX_SCREENSHOT_BYTES = 256 * 1024;

/** Categories the agent captures through its own CDP connection to Chromium. */
export const CDP_BACKED_CATEGORIES: readonly string[] = ['console', 'network', 'page', 'interaction', 'screenshot'];

/**
 * The categories actually captured for a set of enabled ones: monitor (the health of the
 * agent's CDP capture) is not in the SDK's category list, so it is on whenever a
 * CDP-backed category is, as well as when asked for by name.
 */
export function capturedCategories(enabled: Iterable<string>): Set<string> {
  const out = new Set(enabled);
  if (CDP_BACKED_CATEGORIES.some((c) => out.has(c))) out.add('monitor');
  return out;
}
