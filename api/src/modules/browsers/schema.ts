import { z } from 'zod';
import { paginationQuery } from '../../http/pagination.js';
import { lookupText, queryBoolean, timestamp } from '../../http/schemas.js';
import { chromePolicySchema } from './policy.js';
import { telemetryRequestSchema } from './telemetry.js';

export const MIN_TIMEOUT_SECONDS = 10;
export const MAX_TIMEOUT_SECONDS = 259_200;
export const DEFAULT_TIMEOUT_SECONDS = 60;
export const MAX_TAGS = 50;
export const DEFAULT_VIEWPORT = { width: 1920, height: 1080, refresh_rate: 25 } as const;

// eslint-disable-next-line no-control-regex -- refusing control characters is the point
const noControl = /^[^\u0000-\u001f\u007f-\u009f]*$/u;

/** A session name: 1 to 255 characters without control characters; "" means none. */
export const sessionName = z.string().max(255).regex(noControl, 'must not contain control characters');

/** Same rule as profile and extension names (CONTRACT §1.2). */
export const selectorName = z
  .string()
  .min(1)
  .max(255)
  .regex(/^[A-Za-z0-9._-]+$/, 'letters, digits, ".", "_" and "-" only');

const tagKey = z
  .string()
  .min(1)
  .max(128)
  // eslint-disable-next-line no-control-regex -- refusing control characters is the point
  .regex(/^[^\u0000-\u001f\u007f-\u009f[\]]*$/u, 'must not contain control characters or brackets (tags[k]=v filters could not name it)');

export const tagsSchema = z
  .record(tagKey, z.string().max(256).regex(noControl, 'must not contain control characters'))
  .refine((tags) => Object.keys(tags).length <= MAX_TAGS, { message: `at most ${MAX_TAGS} tags` })
  .describe(`Key-value labels, at most ${MAX_TAGS} pairs`);

export const viewportSchema = z
  .strictObject({
    width: z.number().int().min(1).max(7680).describe('Width in pixels, 1 to 7680'),
    height: z.number().int().min(1).max(4320).describe('Height in pixels, 1 to 4320'),
    refresh_rate: z.number().int().min(1).max(240).optional().describe('Frames per second, 1 to 240 (default 25)'),
  })
  .describe('Screen size of the browser (default 1920x1080@25)');

const profileSelector = z
  .strictObject({
    id: lookupText.optional().describe('Profile id'),
    name: selectorName.optional().describe('Profile name'),
    save_changes: z.boolean().optional().describe('Write the session’s changes back to the profile when it ends'),
  })
  .refine((p) => (p.id === undefined) !== (p.name === undefined), { message: 'give exactly one of id or name' })
  .describe('An existing profile of the project, by id or name');

export const extensionSelector = z.strictObject({ id: lookupText.optional(), name: selectorName.optional() });

export const startUrl = z
  .url({ protocol: /^(https?|about)$/ })
  .max(8192)
  .describe('Page opened at start, best effort: http, https or about URL');

export const createBrowserBody = z
  .strictObject({
    name: sessionName.optional().describe('Unique among active sessions of the project (case-insensitive); "" means none'),
    headless: z.boolean().optional().describe('Headless (default false: headful under a virtual display)'),
    stealth: z.boolean().optional().describe('Anti-detection settings (default false)'),
    gpu: z.boolean().optional().describe('GPU acceleration: no GPU is available here, so true is refused'),
    kiosk_mode: z.boolean().optional().describe('Full-screen kiosk mode (default false)'),
    start_url: startUrl.optional(),
    timeout_seconds: z
      .number()
      .int()
      .min(MIN_TIMEOUT_SECONDS)
      .max(MAX_TIMEOUT_SECONDS)
      .optional()
      .describe('Seconds without a CDP connection before the session is deleted, 10 to 259200 (default 60)'),
    proxy_id: lookupText.optional().describe('A proxy of the project'),
    profile: profileSelector.optional(),
    extensions: z.array(extensionSelector).max(20).optional().describe('Extensions to load: none exist yet, so only [] is accepted'),
    viewport: viewportSchema.optional(),
    chrome_policy: chromePolicySchema.optional(),
    tags: tagsSchema.optional(),
    telemetry: telemetryRequestSchema.nullable().optional(),
    invocation_id: lookupText.optional().describe('A queued or running invocation of the project that owns the browser'),
  })
  .superRefine((body, ctx) => {
    if (body.gpu === true) {
      ctx.addIssue({ code: 'custom', path: ['gpu'], message: 'no GPU is available on this installation; omit gpu or send false' });
    }
    if (body.extensions !== undefined && body.extensions.length > 0) {
      ctx.addIssue({ code: 'custom', path: ['extensions'], message: 'extensions cannot be loaded yet; send [] or omit it' });
    }
  })
  .meta({ id: 'BrowserCreateRequest' });

export const updateBrowserBody = z
  .strictObject({
    name: sessionName.nullable().optional().describe('New name; "" or null clears it'),
    tags: tagsSchema.nullable().optional().describe('Replaces every tag; {} or null clears them'),
    proxy_id: lookupText.or(z.literal('')).nullable().optional().describe('New proxy, applied to the running browser; "" or null removes it'),
    telemetry: telemetryRequestSchema.nullable().optional(),
    viewport: viewportSchema
      .extend({
        force: z.boolean().optional().describe('Resize even while a live view is open (default false: such a resize is a 409 live_view_active)'),
      })
      .optional()
      .describe('New viewport, applied to the running browser first: if it cannot take it, 409 and nothing is stored'),
    profile: profileSelector.optional().describe('Load a profile; only when the session has none'),
    disable_default_proxy: z.boolean().optional().describe('Accepted; there is no default stealth proxy here'),
  })
  .meta({ id: 'BrowserUpdateRequest' });

export const browserIdParams = z.object({ id_or_name: lookupText.describe('Session id or name') });

export const getBrowserQuery = z.object({
  include_deleted: queryBoolean.optional().describe('Also find deleted sessions'),
});

export const listBrowsersQuery = z.object({
  ...paginationQuery,
  status: z.enum(['active', 'deleted', 'all']).optional().describe('active (default), deleted or all'),
  include_deleted: queryBoolean.optional().describe('Deprecated: same as status=all'),
  query: lookupText.optional().describe('Substring of the name, or a session, profile or proxy id (exact or prefix)'),
  // The rules of stored tags: a filter no tag can match is a 400, and a NUL (which
  // Postgres refuses in jsonb) must not reach the query as a 500.
  tags: z
    .record(tagKey, z.string().max(256).regex(noControl, 'must not contain control characters'))
    .optional()
    .describe('tags[k]=v: only sessions with every given tag exactly'),
});

const categoriesResponse = z.record(z.string(), z.object({ enabled: z.boolean() }));

export const browserSessionSchema = z
  .object({
    session_id: z.string(),
    cdp_ws_url: z.string().describe('CDP WebSocket through the service, authorised by a signed token valid for an hour'),
    webdriver_ws_url: z.string().describe('WebDriver BiDi WebSocket through the service (send session.new first; one session per connection), authorised like cdp_ws_url'),
    browser_live_view_url: z
      .string()
      .optional()
      .describe('Headful sessions only: a page showing the browser live, forwarding mouse and keyboard; authorised like cdp_ws_url'),
    created_at: timestamp,
    headless: z.boolean(),
    stealth: z.boolean(),
    gpu: z.boolean(),
    kiosk_mode: z.boolean(),
    timeout_seconds: z.number(),
    name: z.string().optional(),
    pool: z.object({ id: z.string(), name: z.string().optional() }).optional().describe('The pool this browser is leased from'),
    start_url: z.string().optional(),
    proxy_id: z.string().optional(),
    profile: z
      .object({ id: z.string(), name: z.string().nullable(), created_at: timestamp, updated_at: timestamp, last_used_at: timestamp.optional() })
      .optional(),
    viewport: z.object({ width: z.number(), height: z.number(), refresh_rate: z.number() }),
    chrome_policy: z.record(z.string(), z.unknown()).optional(),
    tags: z.record(z.string(), z.string()),
    telemetry: z.object({ browser: categoriesResponse }).nullable(),
    usage: z.object({ uptime_ms: z.number() }),
    deleted_at: timestamp.optional(),
  })
  .meta({ id: 'BrowserSession' });

export type CreateBrowserInput = z.output<typeof createBrowserBody>;
export type UpdateBrowserInput = z.output<typeof updateBrowserBody>;
export type ListBrowsersQuery = z.output<typeof listBrowsersQuery>;
