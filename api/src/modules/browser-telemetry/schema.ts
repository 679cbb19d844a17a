import { z } from 'zod';
import { paginationQuery } from '../../http/pagination.js';
import { sinceQuery } from '../invocations/since.js';
import { TELEMETRY_CATEGORIES } from '../../../../contract/telemetry.js';

/** The wire of GET /browsers/{id}/telemetry/events and /stream (CONTRACT §2.4). */

export const telemetryParams = z.object({ id_or_name: z.string().min(1).max(128).describe('The browser session, by id or name') });

const categoryList = z
  .string()
  .max(512)
  .transform((text, ctx) => {
    const parts = text.split(',').map((part) => part.trim()).filter((part) => part !== '');
    const unknown = parts.filter((part) => !(TELEMETRY_CATEGORIES as readonly string[]).includes(part));
    if (unknown.length > 0) {
      ctx.addIssue({ code: 'custom', message: `unknown categories ${unknown.join(', ')}; known: ${TELEMETRY_CATEGORIES.join(', ')}` });
      return z.NEVER;
    }
    return parts;
  });

export const listTelemetryQuery = z.object({
  limit: paginationQuery.limit,
  // Not the shared one: that defaults to 0, and here an absent offset means something (since applies).
  offset: z.coerce.number().int().min(0).max(Number.MAX_SAFE_INTEGER).optional().describe('Number of events to skip (default 0); when given, since is ignored'),
  category: categoryList.optional().describe(`Only these categories, comma-separated (${TELEMETRY_CATEGORIES.join(', ')})`),
  since: sinceQuery.optional().describe('Events at or after this instant: RFC 3339 or a duration back from now such as 5m (default 5m with order asc and no offset)'),
  until: sinceQuery.optional().describe('Events at or before this instant: RFC 3339 or a duration back from now'),
  order: z.enum(['asc', 'desc']).default('asc').describe('asc (oldest first, default) or desc; desc with since is refused'),
});
export type ListTelemetryQuery = z.output<typeof listTelemetryQuery>;

export const streamTelemetryQuery = z.object({
  replay: z.enum(['all']).optional().describe('all: start from the oldest stored event (a Last-Event-ID header wins over it); without either, only new events'),
});

export const telemetryEventSchema = z
  .object({
    category: z.enum(TELEMETRY_CATEGORIES),
    type: z.string(),
    ts: z.number().describe('Unix microseconds'),
    source: z.object({ kind: z.string(), event: z.string().optional(), metadata: z.record(z.string(), z.string()).optional() }),
    data: z.record(z.string(), z.unknown()).optional(),
    truncated: z.boolean().optional(),
  })
  .meta({ id: 'BrowserTelemetryEvent' });

export const telemetryEnvelopeSchema = z.object({ seq: z.number().int(), event: telemetryEventSchema }).meta({ id: 'BrowserTelemetryEnvelope' });
