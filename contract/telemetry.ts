/**
 * Browser telemetry as the agent and the API agree on it: the categories, which event
 * types belong to which (CONTRACT §2.4), what the agent is told to capture (the launch
 * spec's and the live settings' `telemetry`), and the body it POSTs to the API's side
 * door (`ingestUrl`, authorised by the token in it). The event itself is the SDK's
 * BrowserTelemetryEvent: ts in Unix microseconds, source, data, truncated.
 */
import { z } from 'zod';

// Zod-free, for the agent (which loads no zod while idle); re-exported for the API.
export { capturedCategories, CDP_BACKED_CATEGORIES, TELEMETRY_MAX_SCREENSHOT_BYTES } from './telemetry-capture.js';

export const TELEMETRY_CATEGORIES = ['captcha', 'connection', 'console', 'control', 'interaction', 'monitor', 'network', 'page', 'platform', 'screenshot', 'system'] as const;
export type TelemetryCategory = (typeof TELEMETRY_CATEGORIES)[number];

/** Event type → category (CONTRACT §2.4); an event whose category does not match its type is refused. */
export const TELEMETRY_TYPE_CATEGORY: Record<string, TelemetryCategory> = {
  api_call: 'control',
  platform_api_call: 'platform',
  cdp_connect: 'connection',
  cdp_disconnect: 'connection',
  live_view_connect: 'connection',
  live_view_disconnect: 'connection',
  console_log: 'console',
  console_error: 'console',
  network_request: 'network',
  network_response: 'network',
  network_loading_failed: 'network',
  network_idle: 'network',
  page_navigation: 'page',
  page_dom_content_loaded: 'page',
  page_load: 'page',
  page_tab_opened: 'page',
  page_layout_shift: 'page',
  page_lcp: 'page',
  page_layout_settled: 'page',
  page_navigation_settled: 'page',
  interaction_click: 'interaction',
  interaction_key: 'interaction',
  interaction_scroll_settled: 'interaction',
  monitor_screenshot: 'screenshot',
  monitor_disconnected: 'monitor',
  monitor_reconnected: 'monitor',
  monitor_reconnect_failed: 'monitor',
  monitor_init_failed: 'monitor',
  captcha_solve_result: 'captcha',
  captcha_challenge_result: 'captcha',
  system_oom_kill: 'system',
  service_crashed: 'system',
};

/** An event's data larger than this (as JSON) is cut down by its producer and flagged truncated. */
export const TELEMETRY_MAX_DATA_BYTES = 16 * 1024;
/** Events in one POST to the side door. */
export const TELEMETRY_MAX_BATCH = 500;

/** What the agent captures and where it sends it; absent: nothing captured. */
export const telemetrySpecSchema = z.object({
  /** The API's side door for this session, token included (purpose "telemetry"). */
  ingestUrl: z.string(),
  /**
   * The enabled categories; empty: nothing captured. A category this agent does not know
   * is left out, not refused: an API newer than a running browser's image may name one.
   */
  categories: z
    .array(z.string().max(64))
    .max(64)
    .transform((names) => names.filter((name): name is TelemetryCategory => (TELEMETRY_CATEGORIES as readonly string[]).includes(name))),
});
export type TelemetrySpec = z.infer<typeof telemetrySpecSchema>;

const metadata = z.record(z.string().max(256), z.string().max(1024));

export const telemetryEventSchema = z
  .object({
    category: z.enum(TELEMETRY_CATEGORIES),
    type: z.string().max(64),
    ts: z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER),
    source: z.object({
      kind: z.enum(['cdp', 'kernel_api', 'extension', 'local_process']),
      event: z.string().max(128).optional(),
      metadata: metadata.optional(),
    }),
    data: z.record(z.string(), z.unknown()).optional(),
    truncated: z.boolean().optional(),
  })
  .refine((e) => TELEMETRY_TYPE_CATEGORY[e.type] === e.category, { message: 'type does not belong to category', path: ['type'] });
export type TelemetryEvent = z.infer<typeof telemetryEventSchema>;

/** POST <ingestUrl>: a batch, and how many events the agent dropped since its last batch (queue full). */
export const telemetryIngestBodySchema = z.object({
  events: z.array(telemetryEventSchema).max(TELEMETRY_MAX_BATCH),
  dropped: z.number().int().nonnegative().default(0),
});
export type TelemetryIngestBody = z.infer<typeof telemetryIngestBodySchema>;
