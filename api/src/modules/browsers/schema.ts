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

export const extensionSelector = z
  .strictObject({ id: lookupText.optional().describe('Extension id'), name: selectorName.optional().describe('Extension name') })
  .refine((e) => (e.id === undefined) !== (e.name === undefined), { message: 'give exactly one of id or name' })
  .describe('An uploaded extension of the project, by id or name');

export const startUrl = z
  .url({ protocol: /^(https?|about)$/ })
  .max(8192)
  .describe('Page opened at start, best effort: http, https or about URL');

/*
 * What newer SDKs send for hosted Kernel's machines (Python 0.131: region, location,
 * memory, video_memory, network). Accepted so those clients work; docs/newer-clients.md
 * says why each changes nothing here.
 */
export const BROWSER_REGIONS = ['us-east', 'us-west', 'eu-west', 'ap-southeast'] as const;

export const regionRequest = z
  .enum(BROWSER_REGIONS)
  .describe('Ignored: every browser runs where this service runs; responses name its configured region (BROWSERPLANE_REGION, default us-east)');

const locationText = z.string().max(64).regex(/^[A-Za-z0-9_+/.-]*$/, 'an IANA time zone or a BCP 47 locale');

export const locationRequest = z
  .strictObject({
    timezone: locationText.nullable().optional().describe('IANA time zone'),
    locale: locationText.nullable().optional().describe('BCP 47 locale'),
  })
  .describe('Ignored: hosted Kernel derives a time zone and locale from its regions; browsers here keep the host’s');

export const memoryRequest = z
  .enum(['1GiB', '2GiB', '4GiB', '8GiB', '16GiB'])
  .describe('Ignored: a browser gets the memory of its host or pod; responses report Kernel’s default for the kind of browser');

const hostList = z.array(z.string().max(255)).max(256);

/**
 * Hosted Kernel's egress proxy features. An allowlist or proxy routes a caller relies on
 * to keep pages away from hosts cannot be dropped silently, so those are refused; the
 * direct-routing list (private_hosts) only widens what hosted egress reaches, and a
 * browser here already reaches what its host reaches.
 */
export const networkRequest = z
  .strictObject({
    allowed_hosts: hostList.nullable().optional(),
    private_hosts: hostList.optional(),
    proxy_routes: z.array(z.unknown()).max(256).optional(),
    expected_allowlist_revision: z.string().max(255).optional(),
    mutation_id: z.string().max(255).optional(),
  })
  .superRefine((network, ctx) => {
    for (const key of ['allowed_hosts', 'proxy_routes'] as const) {
      const value = network[key];
      if (value !== undefined && value !== null) {
        ctx.addIssue({
          code: 'custom',
          path: [key],
          message: `is not enforced on this service (no egress proxy); use a proxy (proxy_id) or the service's BROWSERPLANE_BLOCK_PRIVATE_NETWORKS instead`,
        });
      }
    }
  })
  .describe('Egress settings of hosted Kernel: allowed_hosts and proxy_routes are refused (not enforced here); private_hosts is ignored');

const createBrowserFields = {
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
  extensions: z.array(extensionSelector).max(20).optional().describe('Uploaded extensions of the project to load, at most 20'),
  viewport: viewportSchema.optional(),
  chrome_policy: chromePolicySchema.optional(),
  tags: tagsSchema.optional(),
  telemetry: telemetryRequestSchema.nullable().optional(),
  invocation_id: lookupText.optional().describe('A queued or running invocation of the project that owns the browser'),
};

function refuseUnavailable(body: { gpu?: boolean | undefined }, ctx: z.RefinementCtx): void {
  if (body.gpu === true) {
    ctx.addIssue({ code: 'custom', path: ['gpu'], message: 'no GPU is available on this installation; omit gpu or send false' });
  }
}

/** A BrowserSession manifest's spec (the operator's CRD is generated from it): what this service does. */
export const createBrowserBody = z.strictObject(createBrowserFields).superRefine(refuseUnavailable);

/** POST /browsers: the manifest's fields and what newer SDKs send for hosted Kernel (accepted, changing nothing). */
export const createBrowserHttpBody = z
  .strictObject({
    ...createBrowserFields,
    region: regionRequest.optional(),
    location: locationRequest.optional(),
    memory: memoryRequest.optional(),
    video_memory: z.enum(['2GiB', '4GiB']).optional().describe('Ignored: GPU browsers only, and gpu true is refused'),
    network: networkRequest.optional(),
  })
  .superRefine(refuseUnavailable)
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
    start_url: startUrl
      .or(z.literal(''))
      .optional()
      .describe('Navigate the running browser’s first tab here after the change, best effort (a failed navigation does not fail the update); "" leaves the page as it is'),
    location: locationRequest.optional(),
    network: networkRequest.optional(),
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
    region: z.string().describe('The service’s configured region (BROWSERPLANE_REGION, default us-east)'),
    memory: z.enum(['1GiB', '8GiB']).describe('Kernel’s default for the kind of browser (1GiB headless, 8GiB headful); not a limit here'),
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
