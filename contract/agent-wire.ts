/**
 * The bodies of the agent's HTTP API as zod schemas: the agent (agent/src/server.ts,
 * reset.ts) checks what it is sent and types what it answers with them, and the
 * service's client (agent-client.ts) reads the answers through them. Wire spelling is
 * snake_case, as in the public API.
 */
import { z } from 'zod';
import type { BrowserResetReport } from './browser-runtime.js';

export { liveBrowserSettingsSchema as agentSettingsRequestSchema } from './launch-spec.js';

/** What every refusal of the agent carries. */
export const agentErrorSchema = z.object({ code: z.string(), message: z.string() });
export type AgentError = z.infer<typeof agentErrorSchema>;

/** The message of a refusal, or `fallback` when the body has none (not JSON, another server). */
export function agentErrorMessage(body: unknown, fallback: string): string {
  const parsed = z.object({ message: z.string() }).safeParse(body);
  return parsed.success ? parsed.data.message : fallback;
}

/** standby: waiting to be claimed (standby.ts); the others are a claimed agent's life. */
export const AGENT_STATUSES = ['standby', 'starting', 'ready', 'stopping'] as const;
export type AgentStatus = (typeof AGENT_STATUSES)[number];

/**
 * GET /health with the agent token (without it, only {status}). 200 when ready, else 503
 * with the same body. A standby agent has no browser id yet and reports no kinds.
 */
export const agentHealthSchema = z.object({
  status: z.enum(AGENT_STATUSES),
  /** Chromium's process has been started (while starting: it may not answer CDP yet). */
  spawned: z.boolean().optional(),
  browser_id: z.string().nullable(),
  browser: z.object({ version: z.string(), pid: z.number().int(), sandbox: z.boolean() }).nullable(),
  /** Client connections of every kind (CDP, WebDriver BiDi, live view). */
  connections: z.number().int().nonnegative(),
  connections_by_kind: z.record(z.string(), z.number().int().nonnegative()).optional(),
  /** When the last client left (RFC 3339); null while one is connected. */
  idle_since: z.string().nullable(),
});
export type AgentHealth = z.infer<typeof agentHealthSchema>;

/**
 * The service's reading of /health: the status must be one the agent sends, the rest falls
 * back field by field (no browser, no connections, not idle), so an older agent or a
 * stand-in that leaves a field out still reports what it has.
 */
const agentHealthReading = z.object({
  status: agentHealthSchema.shape.status,
  spawned: z.boolean().catch(false),
  browser_id: agentHealthSchema.shape.browser_id.catch(null),
  browser: agentHealthSchema.shape.browser.catch(null),
  connections: agentHealthSchema.shape.connections.catch(0),
  connections_by_kind: z.record(z.string(), z.number().int().nonnegative()).catch({}),
  idle_since: agentHealthSchema.shape.idle_since.catch(null),
});

/** A /health body as the service reads it (see agentHealthReading); undefined when it has no valid status. */
export function readAgentHealth(body: unknown): AgentHealth | undefined {
  const parsed = agentHealthReading.safeParse(body);
  return parsed.success ? parsed.data : undefined;
}

/** idle_since as a date; null while a client is connected or when it is not a date. */
export function idleSinceOf(health: Pick<AgentHealth, 'idle_since'>): Date | null {
  const idle = health.idle_since === null ? null : new Date(health.idle_since);
  return idle && !Number.isNaN(idle.getTime()) ? idle : null;
}

/** POST /settings (body: agentSettingsRequestSchema): 200 with this, 503 not_ready, 422 settings_not_applied. */
export const agentSettingsAnswerSchema = z.object({ status: z.literal('applied') });
export type AgentSettingsAnswer = z.infer<typeof agentSettingsAnswerSchema>;

/** Longest start_url a reset takes (the API's own limit on start URLs). */
export const MAX_START_URL_LENGTH = 2048;

/** POST /reset: an empty body or this; start_url is http(s) or about:blank (the agent checks the URL itself). */
export const agentResetRequestSchema = z.strictObject({
  start_url: z.string().max(MAX_START_URL_LENGTH).optional(),
});
export type AgentResetRequest = z.infer<typeof agentResetRequestSchema>;

/** POST /reset's 200: what the reset did (BrowserResetReport in wire spelling); 400 invalid_request, 409 reset_failed. */
export const agentResetReportSchema = z.object({
  closed_connections: z.number().int().nonnegative(),
  closed_targets: z.number().int().nonnegative(),
  disposed_contexts: z.number().int().nonnegative(),
  cookies_restored: z.number().int().nonnegative(),
});
export type AgentResetReport = z.infer<typeof agentResetReportSchema>;

/** The service's reading of the report: a count the agent left out counts as 0. */
export function readAgentResetReport(body: unknown): BrowserResetReport {
  const count = (key: keyof AgentResetReport) => agentResetReportSchema.shape[key].catch(0);
  const report = z
    .object({ closed_connections: count('closed_connections'), closed_targets: count('closed_targets'), disposed_contexts: count('disposed_contexts'), cookies_restored: count('cookies_restored') })
    .catch({ closed_connections: 0, closed_targets: 0, disposed_contexts: 0, cookies_restored: 0 })
    .parse(body);
  return { closedConnections: report.closed_connections, closedTargets: report.closed_targets, disposedContexts: report.disposed_contexts, cookiesRestored: report.cookies_restored };
}

/**
 * POST /shutdown: grace_ms overrides the agent's grace period for Chromium; save_profile
 * false closes without writing the profile back (default: as launched). A field of the
 * wrong type counts as absent, so a shutdown is never refused. Answer: 202 {status: 'stopping'}.
 */
export const agentShutdownRequestSchema = z
  .object({
    grace_ms: z.number().min(0).optional().catch(undefined),
    save_profile: z.boolean().optional().catch(undefined),
  })
  .catch({});
export type AgentShutdownRequest = z.input<typeof agentShutdownRequestSchema>;
export const agentShutdownAnswerSchema = z.object({ status: z.literal('stopping') });
export type AgentShutdownAnswer = z.infer<typeof agentShutdownAnswerSchema>;
