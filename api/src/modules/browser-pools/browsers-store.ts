import { prepared, type Queryable } from '../../db/pool.js';
import { foldName } from '../../ids.js';
import { selectSessionsFrom, type SessionRow } from '../browsers/store.js';
import type { TelemetryConfig } from '../browsers/telemetry.js';
import type { PoolRow } from './store.js';

/**
 * SQL over a pool's browsers (browser_sessions rows with pool_id). A browser is in one of
 * four states, read from its row alone:
 *   starting  phase 'starting'                      (being launched; counts toward size)
 *   idle      phase 'running', leased_at NULL       (available to acquire)
 *   leased    leased_at set                         (held by a client)
 *   ended     deleted_at set                        (gone; the pool warms a replacement)
 */

export interface PoolBrowserCounts {
  total: number;
  starting: number;
  idle: number;
  leased: number;
}

export async function countPoolBrowsers(db: Queryable, poolId: string): Promise<PoolBrowserCounts> {
  const { rows } = await db.query<PoolBrowserCounts>(
    `SELECT count(*)::int AS total,
            (count(*) FILTER (WHERE phase = 'starting'))::int AS starting,
            (count(*) FILTER (WHERE phase = 'running' AND leased_at IS NULL))::int AS idle,
            (count(*) FILTER (WHERE leased_at IS NOT NULL))::int AS leased
       FROM browser_sessions WHERE pool_id = $1 AND deleted_at IS NULL`,
    [poolId],
  );
  return rows[0]!;
}

export interface EndedBrowser {
  id: string;
  profile_save_changes: boolean;
}

/**
 * Marks idle browsers of the pool ended, and returns them for the runtime to close. Marked
 * first, in one statement, so no acquire can lease one of them in between; old generations
 * go first, then the newest (the oldest have been warm longest and are the ones to keep).
 */
export async function endIdleBrowsers(
  db: Queryable,
  poolId: string,
  reason: string,
  now: Date,
  options: { limit?: number; olderThanGeneration?: number } = {},
): Promise<EndedBrowser[]> {
  const { rows } = await db.query<EndedBrowser>(
    `UPDATE browser_sessions SET deleted_at = $2, deleted_reason = $3, updated_at = $2
      WHERE id IN (
        SELECT id FROM browser_sessions
         WHERE pool_id = $1 AND deleted_at IS NULL AND leased_at IS NULL AND phase = 'running'
           AND ($5::int IS NULL OR pool_generation < $5)
         ORDER BY pool_generation, started_at DESC
         LIMIT $4
         FOR UPDATE SKIP LOCKED)
      RETURNING id, profile_save_changes`,
    [poolId, now, reason, options.limit ?? null, options.olderThanGeneration ?? null],
  );
  return rows;
}

/** Every live browser of the pool (idle, starting and leased), marked ended. */
export async function endAllPoolBrowsers(db: Queryable, poolId: string, reason: string, now: Date): Promise<EndedBrowser[]> {
  const { rows } = await db.query<EndedBrowser>(
    `UPDATE browser_sessions SET deleted_at = $2, deleted_reason = $3, updated_at = $2
      WHERE pool_id = $1 AND deleted_at IS NULL RETURNING id, profile_save_changes`,
    [poolId, now, reason],
  );
  return rows;
}

export interface Lease {
  name: string | null;
  tags: Record<string, string>;
  startUrl: string | null;
  /** The lease's telemetry; undefined keeps what the browser was made with (the pool's). */
  telemetry?: TelemetryConfig | null;
  /**
   * Answer before the commit reaches disk (synchronous_commit off for this statement's
   * transaction alone): saves the WAL fsync, the largest part of an acquire's time, at the
   * cost of forgetting the lease if Postgres crashes in the next few hundred ms.
   */
  fastCommit?: boolean;
}

/** Which pool: by id, or by id or name within a project (as the API addresses pools). */
export type PoolRef = { id: string } | { scope: { orgId: string; projectId: string }; idOrName: string };

/**
 * Leases the pool's oldest idle browsers (current generation first), one per lease, in one
 * statement and one commit: `locked` locks up to leases.length idle rows and skips rows
 * that other acquires hold, so concurrent statements take distinct browsers without
 * waiting on each other, and a row leased by a transaction that committed in between is
 * re-checked and passed over. The i-th lease gets the i-th browser, with its own name,
 * tags, start_url and telemetry, and the pool's timeout_seconds. The answer has one entry
 * per lease, in order: undefined for the leases past the idle browsers (or all of them,
 * when there is no such pool). A lease name another active session has raises the unique
 * violation and leases nothing, so callers batch only unnamed leases.
 */
export async function leaseIdleBrowsers(db: Queryable, ref: PoolRef, leases: readonly Lease[], now: Date): Promise<(SessionRow | undefined)[]> {
  if (leases.length === 0) return [];
  const byId = 'id' in ref;
  const { rows } = await db.query<SessionRow>(
    prepared(
      `WITH pool AS (
         SELECT id, generation, timeout_seconds FROM browser_pools, (SELECT set_config('synchronous_commit', $10, true)) commit_mode
          WHERE deleted_at IS NULL AND draining_since IS NULL AND ${byId ? 'id = $1' : 'org_id = $11 AND project_id = $12 AND (id = $1 OR name_key = $13)'}
          ORDER BY (id = $1) DESC LIMIT 1),
       want AS (
         SELECT * FROM unnest($3::text[], $4::text[], $5::jsonb[], $6::text[], $7::boolean[], $8::jsonb[])
                WITH ORDINALITY AS w(name, name_key, tags, start_url, set_telemetry, telemetry, n)),
       locked AS (
         SELECT i.id, i.pool_generation = pool.generation AS current, i.started_at FROM browser_sessions i, pool
          WHERE i.pool_id = pool.id AND i.deleted_at IS NULL AND i.leased_at IS NULL AND i.phase = 'running'
          ORDER BY (i.pool_generation = pool.generation) DESC, i.started_at
          LIMIT $9
          FOR UPDATE OF i SKIP LOCKED),
       pick AS (SELECT id, row_number() OVER (ORDER BY current DESC, started_at) AS n FROM locked),
       leased AS (
         UPDATE browser_sessions s
            SET leased_at = $2, lease_seq = s.lease_seq + 1, name = w.name, name_key = w.name_key, tags = w.tags,
                start_url = coalesce(w.start_url, s.start_url),
                telemetry = CASE WHEN w.set_telemetry THEN w.telemetry ELSE s.telemetry END, timeout_seconds = pool.timeout_seconds, updated_at = $2
           FROM pick JOIN want w ON w.n = pick.n, pool
          WHERE s.id = pick.id
          RETURNING s.*, w.n AS lease_n)
       ${selectSessionsFrom('leased')} ORDER BY s.lease_n`,
      [
        byId ? ref.id : ref.idOrName,
        now,
        leases.map((l) => l.name),
        leases.map((l) => (l.name === null ? null : foldName(l.name))),
        leases.map((l) => JSON.stringify(l.tags)),
        leases.map((l) => l.startUrl),
        leases.map((l) => l.telemetry !== undefined),
        leases.map((l) => (l.telemetry === undefined || l.telemetry === null ? null : JSON.stringify(l.telemetry))),
        leases.length,
        // One commit for the batch: fast only when every lease of it asked for fast.
        leases.every((l) => l.fastCommit === true) ? 'off' : 'on',
        ...(byId ? [] : [ref.scope.orgId, ref.scope.projectId, foldName(ref.idOrName)]),
      ],
    ),
  );
  // The k browsers leased went to leases 1..k, in order (pick numbers them 1..k).
  return leases.map((_, i) => rows[i]);
}

/** One lease: leaseIdleBrowsers with a batch of one. */
export async function leaseIdleBrowser(db: Queryable, ref: PoolRef, lease: Lease, now: Date): Promise<SessionRow | undefined> {
  return (await leaseIdleBrowsers(db, ref, [lease], now))[0];
}

export interface LeasedBrowser {
  id: string;
  pool_generation: number;
  lease_seq: number;
  proxy_id: string | null;
  viewport_width: number;
  viewport_height: number;
  viewport_refresh_rate: number;
  profile_save_changes: boolean;
  /** The lease's telemetry (its acquire's, or a PATCH's since): the release puts the pool's back. */
  telemetry: TelemetryConfig | null;
}

/** A browser of the pool that a client holds, locked for the release. */
export async function lockLease(db: Queryable, poolId: string, sessionId: string): Promise<LeasedBrowser | undefined> {
  const { rows } = await db.query<LeasedBrowser>(
    `SELECT id, pool_generation, lease_seq, proxy_id, viewport_width, viewport_height, viewport_refresh_rate, profile_save_changes, telemetry
       FROM browser_sessions
      WHERE pool_id = $1 AND id = $2 AND deleted_at IS NULL AND leased_at IS NOT NULL
      FOR UPDATE`,
    [poolId, sessionId],
  );
  return rows[0];
}

/**
 * The first half of a release with reuse: the lease number moves on, so the holder's URLs
 * stop working at once, while the browser still counts as acquired until its reset is done
 * and nobody else can lease it.
 */
export async function revokeLease(db: Queryable, sessionId: string, now: Date): Promise<void> {
  await db.query('UPDATE browser_sessions SET lease_seq = lease_seq + 1, updated_at = $2 WHERE id = $1 AND deleted_at IS NULL', [sessionId, now]);
}

/**
 * Back to idle with the pool's settings: the lease's name, tags, start_url and telemetry
 * were for that lease alone. False when the browser ended meanwhile.
 */
export async function returnToIdle(
  db: Queryable,
  sessionId: string,
  pool: Pick<PoolRow, 'start_url' | 'telemetry' | 'timeout_seconds'>,
  now: Date,
): Promise<boolean> {
  const { rowCount } = await db.query(
    `UPDATE browser_sessions
        SET leased_at = NULL, name = NULL, name_key = NULL, tags = '{}', start_url = $2, telemetry = $3, timeout_seconds = $4, updated_at = $5
      WHERE id = $1 AND deleted_at IS NULL`,
    [sessionId, pool.start_url, pool.telemetry === null ? null : JSON.stringify(pool.telemetry), pool.timeout_seconds, now],
  );
  return rowCount === 1;
}

/** The ids of live pools, across tenants, oldest first: the fill's pass walks them. */
export async function listLivePoolIds(db: Queryable): Promise<string[]> {
  const { rows } = await db.query<{ id: string }>('SELECT id FROM browser_pools WHERE deleted_at IS NULL ORDER BY created_at, seq');
  return rows.map((r) => r.id);
}

export async function isPoolLive(db: Queryable, poolId: string): Promise<boolean> {
  const { rows } = await db.query('SELECT 1 FROM browser_pools WHERE id = $1 AND deleted_at IS NULL', [poolId]);
  return rows.length === 1;
}
