import { z } from 'zod';
import { paginationQuery } from '../../http/pagination.js';
import { lookupText, timestamp } from '../../http/schemas.js';
import { chromePolicySchema } from '../browsers/policy.js';
import { extensionSelector, memoryRequest, networkRequest, regionRequest, MAX_TIMEOUT_SECONDS, MIN_TIMEOUT_SECONDS, selectorName, sessionName, startUrl, tagsSchema, viewportSchema } from '../browsers/schema.js';
import { telemetryRequestSchema } from '../browsers/telemetry.js';
import { MAX_EXTENSIONS_PER_BROWSER } from '../extensions/index.js';

export const DEFAULT_FILL_RATE_PER_MINUTE = 25;
export const DEFAULT_POOL_TIMEOUT_SECONDS = 600;

/**
 * A pool's profile: by id or by name. Pools load profiles read-only, so save_changes is
 * accepted and dropped (CONTRACT §3: ignored, not rejected).
 */
const poolProfile = z
  .strictObject({
    id: lookupText.optional().describe('Profile id'),
    name: selectorName.optional().describe('Profile name'),
    save_changes: z.boolean().optional().describe('Ignored: pools never write their profile back'),
  })
  .refine((p) => (p.id === undefined) !== (p.name === undefined), { message: 'give exactly one of id or name' })
  .transform(({ id, name }) => (id !== undefined ? { id } : { name: name! }));

/** In a PATCH, `{"id": ""}` clears the profile. */
const poolProfileUpdate = z.union([z.strictObject({ id: z.literal('') }).transform(() => null), poolProfile]);

const extensions = z
  .array(extensionSelector)
  .max(MAX_EXTENSIONS_PER_BROWSER)
  .describe(`Uploaded extensions of the project every browser of the pool loads, in this order, at most ${MAX_EXTENSIONS_PER_BROWSER}`);

const fields = {
  size: z.number().int().min(1).max(100_000).describe('Browsers kept warm; the sum over the project’s pools is capped by max_pooled_sessions'),
  fill_rate_per_minute: z.number().int().min(1).describe('Percent of the pool started per minute (default 25); only the lower bound is checked'),
  timeout_seconds: z
    .number()
    .int()
    .min(MIN_TIMEOUT_SECONDS)
    .max(MAX_TIMEOUT_SECONDS)
    .describe('Idle timeout of an acquired browser, 10 to 259200 (default 600)'),
  headless: z.boolean().describe('Headless browsers (default false)'),
  stealth: z.boolean().describe('Anti-detection settings (default false)'),
  kiosk_mode: z.boolean().describe('Kiosk mode (default false)'),
  viewport: viewportSchema,
  chrome_policy: chromePolicySchema,
  telemetry: telemetryRequestSchema.nullable(),
  refresh_on_profile_update: z.boolean().describe('Rebuild idle browsers when the profile is saved (default true with a profile; needs one)'),
};

const createPoolFields = {
  size: fields.size,
  fill_rate_per_minute: fields.fill_rate_per_minute.optional(),
  timeout_seconds: fields.timeout_seconds.optional(),
  headless: fields.headless.optional(),
  stealth: fields.stealth.optional(),
  kiosk_mode: fields.kiosk_mode.optional(),
  viewport: fields.viewport.optional(),
  chrome_policy: fields.chrome_policy.optional(),
  telemetry: fields.telemetry.optional(),
  refresh_on_profile_update: fields.refresh_on_profile_update.optional(),
  name: sessionName.optional().describe('Unique among live pools of the project (case-insensitive); "" means none'),
  start_url: startUrl.optional(),
  proxy_id: lookupText.optional().describe('A proxy of the project'),
  profile: poolProfile.optional(),
  extensions: extensions.optional(),
};

function needsProfile(body: { refresh_on_profile_update?: boolean | undefined; profile?: unknown }, ctx: z.RefinementCtx): void {
  if (body.refresh_on_profile_update === true && body.profile === undefined) {
    ctx.addIssue({ code: 'custom', path: ['refresh_on_profile_update'], message: 'needs a profile' });
  }
}

/** A BrowserPool manifest's spec (the operator's CRD is generated from it): what this service does. */
export const createPoolBody = z.strictObject(createPoolFields).superRefine(needsProfile);

/** POST /browser_pools: the manifest's fields and what newer SDKs send for hosted Kernel (accepted, changing nothing). */
export const createPoolHttpBody = z
  .strictObject({
    ...createPoolFields,
    region: regionRequest.optional(),
    memory: memoryRequest.optional(),
    network: networkRequest.optional(),
  })
  .superRefine(needsProfile)
  .meta({ id: 'BrowserPoolCreateRequest' });

export const updatePoolBody = z
  .strictObject({
    size: fields.size.optional(),
    fill_rate_per_minute: fields.fill_rate_per_minute.optional(),
    timeout_seconds: fields.timeout_seconds.optional(),
    headless: fields.headless.optional(),
    stealth: fields.stealth.optional(),
    kiosk_mode: fields.kiosk_mode.optional(),
    viewport: fields.viewport.optional(),
    chrome_policy: fields.chrome_policy.optional(),
    telemetry: fields.telemetry.optional().describe('null or {} changes nothing; enabled false clears; browser merges'),
    refresh_on_profile_update: fields.refresh_on_profile_update.optional(),
    name: sessionName.optional().describe('New name; "" changes nothing (a name cannot be cleared)'),
    start_url: startUrl.or(z.literal('')).optional().describe('New start URL; "" clears it'),
    proxy_id: lookupText.or(z.literal('')).optional().describe('New proxy; "" clears it'),
    profile: poolProfileUpdate.optional().describe('New profile; {"id": ""} clears it and turns refresh_on_profile_update off'),
    extensions: extensions.optional().describe('[] clears'),
    discard_all_idle: z.boolean().optional().describe('Rebuild every idle browser, not only those of the old configuration'),
    memory: memoryRequest.optional(),
    network: networkRequest.optional(),
    expected_network: networkRequest.optional().describe('Ignored with network: no egress allowlist exists here to compare'),
  })
  .meta({ id: 'BrowserPoolUpdateRequest' });

export const deletePoolBody = z
  .strictObject({ force: z.boolean().optional().describe('Terminate leased browsers instead of refusing with 409') })
  .meta({ id: 'BrowserPoolDeleteRequest' });

export const poolIdParams = z.object({ id_or_name: lookupText.describe('Pool id or name') });

export const listPoolsQuery = z.object({
  ...paginationQuery,
  name: lookupText.optional().describe('Exact name, case- and accent-insensitive'),
  query: lookupText.optional().describe('Substring of the name, or a pool id'),
});

const categoriesResponse = z.record(z.string(), z.object({ enabled: z.boolean() }));

export const browserPoolSchema = z
  .object({
    id: z.string(),
    acquired_count: z.number(),
    available_count: z.number(),
    starting_count: z.number().describe('Browsers of the pool still starting: the fill in progress (Browserplane extra; size = starting + available + acquired once full)'),
    browser_pool_config: z
      .object({
        size: z.number(),
        fill_rate_per_minute: z.number().optional(),
        timeout_seconds: z.number().optional(),
        headless: z.boolean().optional(),
        stealth: z.boolean().optional(),
        kiosk_mode: z.boolean().optional(),
        name: z.string().optional(),
        start_url: z.string().optional(),
        proxy_id: z.string().optional(),
        profile: z.object({ id: z.string().optional(), name: z.string().optional() }).optional(),
        refresh_on_profile_update: z.boolean().optional(),
        viewport: z.object({ width: z.number(), height: z.number(), refresh_rate: z.number().optional() }).optional(),
        chrome_policy: z.record(z.string(), z.unknown()).optional(),
        extensions: z.array(z.object({ id: z.string().optional(), name: z.string().optional() })).optional(),
        telemetry: z.object({ browser: categoriesResponse }).nullable().optional(),
        region: z.string().optional().describe('As sent; ignored'),
        memory: z.string().optional().describe('As sent; ignored'),
        network: z.object({ private_hosts: z.array(z.string()).optional() }).optional().describe('As sent; ignored'),
      })
      .describe('The configuration as it was sent'),
    created_at: timestamp,
    region: z.string().describe('The service’s configured region (BROWSERPLANE_REGION, default us-east)'),
    extension_ids: z.array(z.string()).describe('The ids of the extensions the pool’s browsers load, in load order'),
    name: z.string().optional(),
    profile_id: z.string().optional(),
  })
  .meta({ id: 'BrowserPool' });

/** The longest an acquire holds its request: the SDK gives up at 60 s (CONTRACT §12.6). */
export const MAX_ACQUIRE_WAIT_SECONDS = 55;

export const acquirePoolBody = z
  .strictObject({
    acquire_timeout_seconds: z
      .number()
      .min(0)
      .optional()
      .describe(`Longest wait for a browser, in seconds; held at most ${MAX_ACQUIRE_WAIT_SECONDS} s, then 204 (retry to keep waiting). Default: the time the pool needs to fill at its fill rate`),
    name: sessionName.optional().describe('Session name for this lease only; unique among active sessions of the project'),
    start_url: startUrl.optional().describe('Opened for this lease (best effort) instead of the pool’s start_url'),
    tags: tagsSchema.optional().describe('Tags for this lease only'),
    telemetry: telemetryRequestSchema.nullable().optional().describe('Merged onto the pool’s telemetry for this lease only'),
  })
  .meta({ id: 'BrowserPoolAcquireRequest' });

export const releasePoolBody = z
  .strictObject({
    session_id: lookupText.describe('The leased session'),
    reuse: z.boolean().optional().describe('true (default): reset the browser and return it to the pool; false: destroy it and warm a new one'),
  })
  .meta({ id: 'BrowserPoolReleaseRequest' });

export type AcquirePoolInput = z.output<typeof acquirePoolBody>;
export type ReleasePoolInput = z.output<typeof releasePoolBody>;
export type CreatePoolInput = z.output<typeof createPoolBody>;
export type UpdatePoolInput = z.output<typeof updatePoolBody>;
export type ListPoolsQuery = z.output<typeof listPoolsQuery>;
