import { z } from 'zod';

/**
 * `since` as the API takes it: an RFC 3339 timestamp, or a duration back from now
 * such as `30s`, `5m`, `2h`, `1d` (units may be combined, as in `1h30m`; `ms` too).
 */

const UNIT_MS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;
const DURATION = /^(?:\d+(?:\.\d+)?(?:ms|s|m|h|d))+$/;
const PART = /(\d+(?:\.\d+)?)(ms|s|m|h|d)/g;
/** Further back than this is a typo, not a query (and would leave the Date range). */
const MAX_DURATION_MS = 100 * 365 * UNIT_MS.d;

const rfc3339 = z.iso.datetime({ offset: true });

function durationMs(text: string): number | undefined {
  if (!DURATION.test(text)) return undefined;
  let total = 0;
  for (const [, amount, unit] of text.matchAll(PART)) total += Number(amount) * UNIT_MS[unit as keyof typeof UNIT_MS];
  return total <= MAX_DURATION_MS ? total : undefined;
}

/** The instant `since` names, or undefined when it is not a valid value. */
export function resolveSince(text: string, now: Date): Date | undefined {
  const ms = durationMs(text);
  if (ms !== undefined) return new Date(now.getTime() - ms);
  if (!rfc3339.safeParse(text).success) return undefined;
  const at = new Date(text);
  return Number.isNaN(at.getTime()) ? undefined : at;
}

/**
 * Empty is absent: Kernel's CLI sends `since=` (empty) whenever its --since flag is not
 * given (`kernel deploy logs`, `kernel invoke`), and resolveSince('') is undefined.
 */
export const sinceQuery = z
  .string()
  .max(64)
  .refine((text) => text === '' || resolveSince(text, new Date(0)) !== undefined, {
    message: 'must be an RFC 3339 timestamp or a duration such as 30s, 5m, 2h or 1d',
  });
