import { createHash } from 'node:crypto';
import { stringify } from 'safe-stable-stringify';
import type { Queryable } from '../../db/pool.js';
import { foldName } from '../../ids.js';
import type { Scope } from './store.js';
import type { TelemetryConfig } from './telemetry.js';

/**
 * The settings Chromium takes only at start: a spare made with them can serve a create
 * that asks for the same. Everything else a create says (name, tags, timeout, viewport,
 * proxy, start_url, telemetry, invocation) is applied to the spare when it is claimed.
 */
export interface SpareConfig {
  headless: boolean;
  stealth: boolean;
  kiosk_mode: boolean;
  chrome_policy: Record<string, unknown>;
}

/**
 * The key of a launch configuration: a hash of its canonical JSON (safe-stable-stringify
 * sorts object keys at every depth, so two policies that differ only in key order match).
 */
export function spareKeyOf(config: SpareConfig): string {
  const canonical = stringify({ h: config.headless, s: config.stealth, k: config.kiosk_mode, p: config.chrome_policy }) ?? '';
  return `sk_${createHash('sha256').update(canonical).digest('hex').slice(0, 24)}`;
}

/** What creates need of the spare keeper (spares.ts): whether to look for a spare, and to say one was taken or learned. */
export interface Spares {
  readonly enabled: boolean;
  poke(): void;
}

/** What a claim writes over the spare: the create's own fields. */
export interface SpareClaim {
  name: string | null;
  startUrl: string | null;
  timeoutSeconds: number;
  proxyId: string | null;
  viewport: { width: number; height: number; refresh_rate: number };
  tags: Record<string, string>;
  telemetry: TelemetryConfig | null;
  invocationId: string | null;
  now: Date;
}

export interface ClaimedSpare {
  id: string;
  /** The viewport the spare was started with: a create that asks for another gets it applied. */
  launchedViewport: { width: number; height: number; refresh_rate: number };
}

/**
 * Turns a running spare of the project with this key into the caller's session, in one
 * statement: SKIP LOCKED lets concurrent creates take distinct spares without waiting on
 * each other, and the row's created_at and started_at become the claim's time (the
 * session's idle clock starts now). Undefined when none is ready. A name another active
 * session has raises the unique violation, as an insert would.
 */
export async function claimSpare(db: Queryable, scope: Scope, key: string, claim: SpareClaim): Promise<ClaimedSpare | undefined> {
  const { rows } = await db.query<{ id: string; width: number; height: number; refresh_rate: number }>(
    `WITH pick AS (
       SELECT id, viewport_width, viewport_height, viewport_refresh_rate FROM browser_sessions
        WHERE project_id = $2 AND org_id = $1 AND spare_key = $3 AND deleted_at IS NULL AND phase = 'running'
        ORDER BY started_at LIMIT 1
        FOR UPDATE SKIP LOCKED)
     UPDATE browser_sessions s
        SET spare_key = NULL, name = $4, name_key = $5, start_url = $6, timeout_seconds = $7, proxy_id = $8,
            viewport_width = $9, viewport_height = $10, viewport_refresh_rate = $11, tags = $12, telemetry = $13,
            invocation_id = $14, created_at = $15, started_at = $15, updated_at = $15
       FROM pick
      WHERE s.id = pick.id
      RETURNING s.id, pick.viewport_width AS width, pick.viewport_height AS height, pick.viewport_refresh_rate AS refresh_rate`,
    [
      scope.orgId,
      scope.projectId,
      key,
      claim.name,
      claim.name === null ? null : foldName(claim.name),
      claim.startUrl,
      claim.timeoutSeconds,
      claim.proxyId,
      claim.viewport.width,
      claim.viewport.height,
      claim.viewport.refresh_rate,
      JSON.stringify(claim.tags),
      claim.telemetry === null ? null : JSON.stringify(claim.telemetry),
      claim.invocationId,
      claim.now,
    ],
  );
  const row = rows[0];
  return row && { id: row.id, launchedViewport: { width: row.width, height: row.height, refresh_rate: row.refresh_rate } };
}

/** A launch configuration some project asked for, with when it last did. */
export interface Demand {
  scope: Scope;
  config: SpareConfig;
  key: string;
  lastAskedAt: Date;
}

/**
 * The configurations of the creates since `since`, newest first, in live projects: what
 * spares are kept for. Pool browsers, spares and profile sessions (a profile is loaded
 * at start, per session) teach nothing. Read from Postgres, so every replica and a
 * restarted service learn the same.
 */
export async function recentDemand(db: Queryable, since: Date, limit: number): Promise<Demand[]> {
  const { rows } = await db.query<SpareConfig & { org_id: string; project_id: string; last_asked_at: Date }>(
    `SELECT s.org_id, s.project_id, s.headless, s.stealth, s.kiosk_mode, s.chrome_policy, max(s.created_at) AS last_asked_at
       FROM browser_sessions s JOIN projects p ON p.id = s.project_id AND p.deleted_at IS NULL
      WHERE s.created_at > $1 AND s.pool_id IS NULL AND s.spare_key IS NULL AND s.profile_id IS NULL
      GROUP BY 1, 2, 3, 4, 5, 6
      ORDER BY last_asked_at DESC
      LIMIT $2`,
    [since, limit],
  );
  return rows.map((row) => demandOf({ orgId: row.org_id, projectId: row.project_id }, row, row.last_asked_at));
}

/** The orgs' default projects (oldest first): where spares of the default configurations go before anything is learned. */
export async function defaultProjects(db: Queryable, limit: number): Promise<Scope[]> {
  const { rows } = await db.query<{ org_id: string; id: string }>(
    'SELECT org_id, id FROM projects WHERE is_default AND deleted_at IS NULL ORDER BY created_at LIMIT $1',
    [limit],
  );
  return rows.map((row) => ({ orgId: row.org_id, projectId: row.id }));
}

export function demandOf(scope: Scope, config: SpareConfig, lastAskedAt: Date): Demand {
  const normal: SpareConfig = { headless: config.headless, stealth: config.stealth, kiosk_mode: config.kiosk_mode, chrome_policy: config.chrome_policy };
  return { scope, config: normal, key: spareKeyOf(normal), lastAskedAt };
}

export interface SpareRow {
  id: string;
  org_id: string;
  project_id: string;
  spare_key: string;
  phase: 'starting' | 'running';
  profile_save_changes: boolean;
}

/** Every live spare, oldest first. */
export async function listSpares(db: Queryable): Promise<SpareRow[]> {
  const { rows } = await db.query<SpareRow>(
    `SELECT id, org_id, project_id, spare_key, phase, profile_save_changes FROM browser_sessions
      WHERE spare_key IS NOT NULL AND deleted_at IS NULL ORDER BY created_at`,
  );
  return rows;
}

/**
 * Ends these spares, those still unclaimed: the row lock makes a claim in flight finish
 * first, and a claimed row (spare_key cleared) is a session the retirement must not touch.
 * The ids returned are the browsers to close.
 */
export async function retireSpares(db: Queryable, ids: string[], reason: string, now: Date): Promise<string[]> {
  if (ids.length === 0) return [];
  const { rows } = await db.query<{ id: string }>(
    `UPDATE browser_sessions SET deleted_at = $2, deleted_reason = $3, updated_at = $2
      WHERE id = ANY($1::text[]) AND spare_key IS NOT NULL AND deleted_at IS NULL
      RETURNING id`,
    [ids, now, reason],
  );
  return rows.map((row) => row.id);
}

/**
 * One replica plans the spares at a time, until its transaction ends: two replicas
 * planning at once would each start the missing spare.
 */
export async function tryLockSparePlanning(db: Queryable): Promise<boolean> {
  const { rows } = await db.query<{ locked: boolean }>(`SELECT pg_try_advisory_xact_lock(${SPARE_LOCK_SPACE}, 0) AS locked`);
  return rows[0]?.locked === true;
}
const SPARE_LOCK_SPACE = 0x1b7c0005;
