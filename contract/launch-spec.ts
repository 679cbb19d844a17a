/**
 * The launch spec and the live settings as one zod schema each: the API builds them, the
 * operator reads the spec from the launch Secret, the agent reads it from AGENT_SPEC (or a
 * standby claim) and the settings from POST /settings, all through these schemas, so the
 * three cannot drift apart. The types are inferred from the schemas.
 *
 * Defaults are the agent's: a spec written by hand (a test, a direct agent run) may leave
 * out everything but browserId.
 */
import { z } from 'zod';
import { telemetrySpecSchema } from './telemetry.js';

export const BROWSER_ID_PATTERN = /^[A-Za-z0-9_-]{1,128}$/;

/** Pixels, as the agent accepts them: Xvfb and the CDP overrides take nothing larger. */
const dimension = z.number().int().positive().max(10_000);

export const viewportSchema = z.object({
  width: dimension,
  height: dimension,
  refreshRate: z.number().optional(),
});
export type Viewport = z.infer<typeof viewportSchema>;

/**
 * An upstream proxy with its credentials decrypted, for the agent only. Only the shape is
 * checked here; the agent's forwarder checks the URL and the bypass list (ProxySpecError,
 * whose message leaves the credentials out).
 */
export const proxySpecSchema = z.object({
  url: z.string(),
  username: z.string().optional(),
  password: z.string().optional(),
  bypassHosts: z.array(z.string()).default([]),
});
export type ProxySpec = z.infer<typeof proxySpecSchema>;

/** A stored profile: the archive to load into the user-data dir, and whether to save it back. */
export const profileTargetSchema = z.object({
  id: z.string(),
  archiveUrl: z.string(),
  saveChanges: z.boolean(),
});
export type ProfileTarget = z.infer<typeof profileTargetSchema>;

/** An uploaded extension the agent fetches (the archive URL's token is the authorisation) and loads at start. */
export const extensionTargetSchema = z.object({
  id: z.string(),
  /** The folder it is unpacked into: [A-Za-z0-9._-], unique in the spec. */
  name: z.string().regex(/^[A-Za-z0-9._-]{1,255}$/).refine((s) => s !== '.' && s !== '..'),
  archiveUrl: z.string(),
});
export type ExtensionTarget = z.infer<typeof extensionTargetSchema>;

/** Everything the agent needs to start Chromium for one session. */
export const browserLaunchSpecSchema = z.object({
  /** Stable id, the session id: launching the same id twice yields the same browser. */
  browserId: z.string().regex(BROWSER_ID_PATTERN, 'must match [A-Za-z0-9_-]{1,128}'),
  orgId: z.string().default(''),
  projectId: z.string().default(''),
  headless: z.boolean().default(true),
  stealth: z.boolean().default(false),
  kioskMode: z.boolean().default(false),
  viewport: viewportSchema.default({ width: 1920, height: 1080 }),
  startUrl: z.string().optional(),
  /** Upstream proxy with credentials already decrypted for the agent only. */
  proxy: proxySpecSchema.optional(),
  /** Chrome enterprise policy for this browser alone, already validated. */
  chromePolicy: z.record(z.string(), z.unknown()).default({}),
  /** Profile archive to load into the user-data dir, and whether to save it back. */
  profile: profileTargetSchema.optional(),
  /** Uploaded extensions to load (--load-extension), fetched before Chromium starts. */
  extensions: z.array(extensionTargetSchema).max(20).optional(),
  /** Labels for the runtime (pool membership, tags), not interpreted by the agent. */
  labels: z.record(z.string(), z.string()).default({}),
  /** Telemetry to capture and where to send it (contract/telemetry.ts); absent: none. */
  telemetry: telemetrySpecSchema.optional(),
});
export type BrowserLaunchSpec = z.infer<typeof browserLaunchSpecSchema>;

/** Settings that change on a running browser (PATCH /browsers/{id}), the body of the agent's POST /settings. */
export const liveBrowserSettingsSchema = z.object({
  /** null removes the proxy. */
  proxy: proxySpecSchema.nullable().optional(),
  viewport: viewportSchema.optional(),
  /**
   * A profile attached to a browser that had none. Chromium reads its user-data dir only at
   * start, so nothing is loaded; the agent saves into it at the end when saveChanges is set.
   */
  profile: profileTargetSchema.optional(),
  /** The telemetry categories changed (PATCH telemetry, a claimed spare): replaces what the agent captures. */
  telemetry: telemetrySpecSchema.optional(),
});
export type LiveBrowserSettings = z.infer<typeof liveBrowserSettingsSchema>;

/** Zod's issues as one line: `<prefix>.<path> <message>` for each, joined by '; '. */
export function issuesText(error: z.ZodError, prefix: string): string {
  return error.issues.map((issue) => `${[prefix, ...issue.path.map(String)].join('.')} ${issue.message}`).join('; ');
}
