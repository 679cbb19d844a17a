import type { AppDeps, ProjectResourceCounter } from '../../app-deps.js';
import { inTransaction, pgErrorCode, UNIQUE_VIOLATION, type Queryable } from '../../db/pool.js';
import { AppError, conflict, notFound } from '../../http/errors.js';
import { newId } from '../../ids.js';
import type { BrowserLaunchSpec, ProxySpec } from '../../../../contract/browser-runtime.js';
import { findProfile, markProfileUsed } from '../profiles/store.js';
import { shareLockLiveProject } from '../projects/store.js';
import { proxyEndpoint } from '../proxies/service.js';
import { findProxy } from '../proxies/store.js';
import { DEFAULT_TIMEOUT_SECONDS, DEFAULT_VIEWPORT, type CreateBrowserInput } from './schema.js';
import {
  countLiveProjectSessions,
  readSessionCaps,
  findSession,
  insertSession,
  lockOrgSessionCreates,
  markDeleted,
  markRunning,
  type Scope,
  type SessionRow,
} from './store.js';
import { createCdpTokens } from './cdp-token.js';
import { launchSpecOf } from './launch-spec.js';
import { profileArchiveUrl } from './profile-archive.js';
import { catchUpTelemetry, telemetrySpecOf } from './telemetry-door.js';
import { resolveSessionExtensions } from './extension-archive.js';
import { applyTelemetry } from './telemetry.js';
import { claimSpare, spareKeyOf, type ClaimedSpare, type Spares } from './spare-store.js';

/** How long a create waits for the browser to be ready. */
export const LAUNCH_TIMEOUT_MS = 30_000;
/** How long Browser.close gets before the runtime kills what is left. */
export const TERMINATE_GRACE_MS = 5_000;
/**
 * Extra time for a session that saves its profile: after Chromium closed, the agent packs
 * the user-data dir and uploads it before it exits. The agent still gives Chromium only its
 * usual grace, so this time is the upload's, not a hung browser's.
 */
export const PROFILE_SAVE_GRACE_MS = 60_000;

export const terminateGraceMs = (row: Pick<SessionRow, 'profile_save_changes'>): number =>
  TERMINATE_GRACE_MS + (row.profile_save_changes ? PROFILE_SAVE_GRACE_MS : 0);
export const CONCURRENCY_RETRY_AFTER_SECONDS = 1;

export const DELETE_REASONS = {
  api: 'deleted',
  idle: 'idle_timeout',
  invocation: 'invocation_finished',
  launchFailed: 'launch_failed',
  launchTimeout: 'launch_timeout',
  gone: 'browser_gone',
  crashed: 'browser_crashed',
  interrupted: 'launch_interrupted',
  poolFlushed: 'pool_flushed',
  poolDeleted: 'pool_deleted',
  poolReleased: 'pool_released',
  poolShrunk: 'pool_shrunk',
  poolRefreshed: 'pool_refreshed',
  poolResetFailed: 'pool_reset_failed',
  spareRetired: 'spare_retired',
  spareHandOverFailed: 'spare_hand_over_failed',
} as const;

export async function getSession(db: Queryable, scope: Scope, idOrName: string, includeDeleted = false): Promise<SessionRow> {
  const row = await findSession(db, scope, idOrName, { includeDeleted });
  if (!row) throw notFound('Browser session', idOrName);
  return row;
}

/** A unique violation of browser_sessions, named for the caller. */
export function sessionConflict(error: unknown, name: string | null): unknown {
  if (pgErrorCode(error) !== UNIQUE_VIOLATION) return error;
  const constraint = (error as { constraint?: string }).constraint;
  if (constraint === 'browser_sessions_profile_writer_live') {
    return conflict('profile_in_use', 'Another active session already writes this profile back (save_changes)');
  }
  return conflict('browser_name_taken', `An active browser session named ${JSON.stringify(name)} already exists in this project`);
}

/**
 * Admits a session: references checked, the org's and the project's caps checked, and the
 * row inserted, all under one per-org lock, so parallel creates cannot overshoot a cap.
 * The row holds the slot from here on; the launch happens after the commit.
 */
type Admitted = { row: SessionRow; spec: BrowserLaunchSpec; spare?: undefined } | { row: SessionRow; spec?: undefined; spare: ClaimedSpare; proxy: ProxySpec | undefined };

async function admitSession(deps: AppDeps, scope: Scope, input: CreateBrowserInput, spares: Spares | undefined): Promise<Admitted> {
  const name = input.name === undefined || input.name === '' ? null : input.name;
  const id = newId('bs');
  // Minted before the row exists, so a failure here leaves no session holding a slot.
  const archiveUrl = input.profile === undefined ? undefined : await profileArchiveUrl(deps, createCdpTokens(deps), id);
  const telemetry = await telemetrySpecOf(deps, createCdpTokens(deps), id, applyTelemetry(null, input.telemetry));
  try {
    return await inTransaction(deps.db, async (tx) => {
      const project = await shareLockLiveProject(tx, scope.orgId, scope.projectId);
      if (project?.id !== scope.projectId) throw new AppError(404, 'project_not_found', 'The project no longer exists');
      const proxy = input.proxy_id === undefined ? undefined : await resolveProxy(deps, tx, scope, input.proxy_id);
      const profile = input.profile === undefined ? undefined : await findProfile(tx, scope, (input.profile.id ?? input.profile.name)!);
      if (input.profile && !profile) throw notFound('Profile', (input.profile.id ?? input.profile.name)!);
      if (input.invocation_id !== undefined) await requireLiveInvocation(tx, scope, input.invocation_id);
      const extensions = await resolveSessionExtensions(deps, tx, { scope, sessionId: id, selectors: input.extensions ?? [] });

      await lockOrgSessionCreates(tx, scope.orgId);
      await enforceCaps(deps, tx, scope);
      const now = deps.clock.now();
      if (profile) await markProfileUsed(tx, profile.id, now);
      const viewport = { ...DEFAULT_VIEWPORT, ...input.viewport };
      // A profile and extensions are loaded at start, per session: only a create without them can take a spare.
      if (spares?.enabled && !profile && extensions.length === 0) {
        const key = spareKeyOf({ headless: input.headless ?? false, stealth: input.stealth ?? false, kiosk_mode: input.kiosk_mode ?? false, chrome_policy: input.chrome_policy ?? {} });
        const spare = await claimSpare(tx, scope, key, {
          name,
          startUrl: input.start_url ?? null,
          timeoutSeconds: input.timeout_seconds ?? DEFAULT_TIMEOUT_SECONDS,
          proxyId: proxy?.row.id ?? null,
          viewport,
          tags: input.tags ?? {},
          telemetry: applyTelemetry(null, input.telemetry),
          invocationId: input.invocation_id ?? null,
          now,
        });
        if (spare) return { row: (await findSession(tx, scope, spare.id))!, spare, proxy: proxy?.endpoint };
      }
      await insertSession(tx, scope, {
        id,
        name,
        headless: input.headless ?? false,
        stealth: input.stealth ?? false,
        gpu: false,
        kioskMode: input.kiosk_mode ?? false,
        startUrl: input.start_url ?? null,
        timeoutSeconds: input.timeout_seconds ?? DEFAULT_TIMEOUT_SECONDS,
        proxyId: proxy?.row.id ?? null,
        profileId: profile?.id ?? null,
        profileSaveChanges: profile !== undefined && input.profile?.save_changes === true,
        viewport,
        chromePolicy: input.chrome_policy ?? {},
        tags: input.tags ?? {},
        telemetry: applyTelemetry(null, input.telemetry),
        invocationId: input.invocation_id ?? null,
        now,
      });
      const row = (await findSession(tx, scope, id))!;
      const spec = launchSpecOf(id, scope, row, { proxy: proxy?.endpoint, archiveUrl, saveProfile: row.profile_save_changes, labels: { ...row.tags }, telemetry, extensions });
      return { row, spec };
    });
  } catch (error) {
    throw sessionConflict(error, name);
  }
}

/** The proxy row and its endpoint with credentials opened, for the agent. */
export async function resolveProxy(deps: AppDeps, db: Queryable, scope: Scope, id: string) {
  const row = await findProxy(db, scope.orgId, scope.projectId, id);
  if (!row) throw notFound('Proxy', id);
  const endpoint = proxyEndpoint(deps, row);
  if (!endpoint) {
    throw new AppError(400, 'no_matching_upstream', `Proxy ${JSON.stringify(id)} is bound to an upstream that is no longer configured`);
  }
  return {
    row,
    endpoint: {
      url: endpoint.uri,
      ...(endpoint.username !== undefined ? { username: endpoint.username } : {}),
      ...(endpoint.password !== undefined ? { password: endpoint.password } : {}),
      bypassHosts: row.bypass_hosts,
    },
  };
}

/** The invocation must be queued or running; FOR SHARE makes a concurrent finish wait for this create. */
async function requireLiveInvocation(db: Queryable, scope: Scope, id: string): Promise<void> {
  const { rows } = await db.query<{ status: string }>(
    'SELECT status FROM invocations WHERE org_id = $1 AND project_id = $2 AND id = $3 FOR SHARE',
    [scope.orgId, scope.projectId, id],
  );
  if (!rows[0]) throw notFound('Invocation', id);
  if (rows[0].status === 'succeeded' || rows[0].status === 'failed') {
    throw conflict('invocation_finished', `Invocation ${JSON.stringify(id)} already finished with status ${rows[0].status}`);
  }
}

/** The project's cap (its own, else the org's default for projects; null: none), the org's cap, and what is live. */
async function sessionCaps(deps: AppDeps, db: Queryable, scope: Scope) {
  const caps = await readSessionCaps(db, scope);
  return { projectCap: caps.projectCap ?? caps.orgDefaultProjectCap, orgCap: deps.settings.orgMaxConcurrentSessions, live: caps.live };
}

async function enforceCaps(deps: AppDeps, db: Queryable, scope: Scope): Promise<void> {
  const { projectCap, orgCap, live } = await sessionCaps(deps, db, scope);
  if (projectCap !== null && live.project >= projectCap) {
    throw concurrencyLimitExceeded(`The project allows ${projectCap} concurrent browser sessions and ${live.project} are active`, 'max_concurrent_sessions', projectCap, live.project);
  }
  if (live.org >= orgCap) {
    throw concurrencyLimitExceeded(`The organisation allows ${orgCap} concurrent browser sessions and ${live.org} are active`, 'org_max_concurrent_sessions', orgCap, live.org);
  }
}

/** How many more browsers the project may run now under its cap and the org's (pool fill). */
export async function sessionRoom(deps: AppDeps, db: Queryable, scope: Scope): Promise<number> {
  const { projectCap, orgCap, live } = await sessionCaps(deps, db, scope);
  return Math.min(projectCap === null ? Number.POSITIVE_INFINITY : projectCap - live.project, orgCap - live.org);
}

function concurrencyLimitExceeded(message: string, code: string, cap: number, active: number): AppError {
  return new AppError(429, 'concurrency_limit_exceeded', `${message}; delete one or raise the limit`, {
    details: [{ code, message: `limit ${cap}, active ${active}` }],
    retryAfterSeconds: CONCURRENCY_RETRY_AFTER_SECONDS,
  });
}

/**
 * POST /browsers: admit, launch (bounded by LAUNCH_TIMEOUT_MS), record where the agent
 * listens. A launch that fails or times out leaves no browser and a deleted row with the
 * reason; the caller gets a 5xx that the SDK is told not to retry (a retry would launch again).
 */
export async function createSession(deps: AppDeps, scope: Scope, input: CreateBrowserInput, spares?: Spares): Promise<SessionRow> {
  const admitted = await admitSession(deps, scope, input, spares);
  // After this create's own launch, so a replacement spare does not compete with it.
  const poke = () => spares?.poke();
  if (!admitted.spare) return launchNew(deps, admitted.row, admitted.spec, poke);
  try {
    return await handOverSpare(deps, admitted.row, admitted.spare, admitted.proxy);
  } finally {
    poke();
  }
}

/**
 * The caller is answered as soon as Chromium is spawned, when the runtime can tell
 * (embedded mode): its first CDP command then waits at the agent for Chromium's first
 * answer instead of following it, and the session's bookkeeping overlaps Chromium's start
 * rather than adding to it. Anything Chromium does wrong after that ends the session as a
 * failed launch (its connections close, the row is deleted with the reason), as a crash
 * would; what fails before the spawn (a profile that cannot be restored, Chromium that
 * cannot be executed) is still this request's error.
 */
async function launchNew(deps: AppDeps, row: SessionRow, spec: BrowserLaunchSpec, settled: () => void): Promise<SessionRow> {
  let answer!: (running: SessionRow) => void;
  const answered = new Promise<SessionRow>((resolve) => (answer = resolve));
  const launched = launchAdmitted(deps, row, spec, { onRunning: (running) => answer(running) }).then(async (running) => {
    if (!running) {
      // Deleted while it started (its invocation finished, or a DELETE by name): it stays deleted.
      await deps.runtime.terminate(row.id, { graceMs: TERMINATE_GRACE_MS });
      throw conflict('browser_deleted', 'The browser session was deleted while it was starting');
    }
    return running;
  });
  void launched.then(settled, settled);
  const first = await Promise.race([answered.then((running) => ({ early: running })), launched.then((running) => ({ running }))]);
  if ('running' in first) return first.running;
  // Answered early: the rest of the launch finishes here, its failures logged and recorded by launchAdmitted.
  launched.catch((error: unknown) => deps.log.warn({ err: error, sessionId: row.id }, 'a browser answered at its spawn did not start'));
  return first.early;
}

/**
 * A claimed spare becomes the caller's browser: the settings a create may set after launch
 * are applied to it (proxy, a viewport other than the one it started with, start_url), as
 * PATCH and a pool lease apply them. If the browser cannot take them, the session ends and
 * the caller gets the launch error a cold create would give.
 */
async function handOverSpare(deps: AppDeps, row: SessionRow, spare: ClaimedSpare, proxy: ProxySpec | undefined): Promise<SessionRow> {
  try {
    const viewport = { width: row.viewport_width, height: row.viewport_height, refresh_rate: row.viewport_refresh_rate };
    const resize = viewport.width !== spare.launchedViewport.width || viewport.height !== spare.launchedViewport.height || viewport.refresh_rate !== spare.launchedViewport.refresh_rate;
    const telemetry = await telemetrySpecOf(deps, createCdpTokens(deps), row.id, row.telemetry);
    if (proxy || resize || telemetry) {
      await deps.runtime.applySettings(row.id, {
        ...(proxy ? { proxy } : {}),
        ...(telemetry ? { telemetry } : {}),
        ...(resize ? { viewport: { width: viewport.width, height: viewport.height, refreshRate: viewport.refresh_rate } } : {}),
      });
    }
  } catch (error) {
    deps.log.error({ err: error, sessionId: row.id }, 'a claimed spare could not take the create’s settings');
    await endSession(deps, row, DELETE_REASONS.spareHandOverFailed).catch(() => undefined);
    throw new AppError(502, 'browser_launch_failed', 'The browser could not be started', { shouldRetry: false, cause: error });
  }
  if (row.start_url !== null) {
    // Best effort, as a cold start's first tab is: a page that fails to load shows its error page.
    await deps.runtime
      .reset(row.id, { startUrl: row.start_url, signal: deps.shutdown })
      .catch((error: unknown) => deps.log.warn({ err: error, sessionId: row.id }, 'opening the start_url in a claimed spare failed; the browser keeps its blank page'));
  }
  deps.log.info({ sessionId: row.id }, 'browser session created from a warm spare');
  return row;
}

/**
 * Launches an admitted browser (bounded by the launch timeout) and records where its agent
 * listens. A launch that fails or times out leaves no browser and a deleted row with the
 * reason; the error is a 5xx that the SDK is told not to retry (a retry would launch again).
 * Shared by POST /browsers, the pools' warm fill and the spares. Returns the running row
 * (as findSession reads it), or undefined when the row was deleted while the browser started.
 */
export async function launchAdmitted(
  deps: AppDeps,
  row: Pick<SessionRow, 'id'>,
  spec: BrowserLaunchSpec,
  options: { onRunning?: (running: SessionRow) => void } = {},
): Promise<SessionRow | undefined> {
  const runtime = deps.runtime;
  // With onRunning, the row is marked running at Chromium's spawn (the runtime's onStarted), once.
  let markedEarly: Promise<SessionRow | undefined> | undefined;
  const onStarted = options.onRunning
    ? ({ agentUrl }: { agentUrl: string }) => {
        const now = deps.clock.now();
        markedEarly = markRunning(deps.db, row.id, { agentUrl, startedAt: now, now });
        markedEarly.then((running) => running && options.onRunning!(running), () => undefined);
      }
    : undefined;
  const launchTimeoutMs = deps.settings.browserLaunchTimeoutMs;
  const timeout = AbortSignal.timeout(launchTimeoutMs);
  const failLaunch = async (reason: string, error: AppError) => {
    await runtime.terminate(row.id, { graceMs: 0 }).catch((e: unknown) => deps.log.error({ err: e, sessionId: row.id }, 'terminating a failed launch failed'));
    if (await markDeleted(deps.db, row.id, reason, deps.clock.now())) deps.sessionEnds.ended(reason);
    return error;
  };
  let observed;
  try {
    observed = await runtime.launch(spec, { signal: AbortSignal.any([timeout, deps.shutdown]), ...(onStarted ? { onStarted } : {}) });
  } catch (error) {
    deps.log.error({ err: error, sessionId: row.id }, 'browser launch failed');
    if (timeout.aborted) {
      throw await failLaunch(DELETE_REASONS.launchTimeout, new AppError(504, 'browser_launch_timeout', `The browser was not ready within ${launchTimeoutMs / 1000} s`, { shouldRetry: false }));
    }
    throw await failLaunch(DELETE_REASONS.launchFailed, new AppError(502, 'browser_launch_failed', 'The browser could not be started', { shouldRetry: false, cause: error }));
  }
  if (observed.phase !== 'Ready' || !observed.agentUrl) {
    deps.log.error({ sessionId: row.id, phase: observed.phase, reason: observed.reason }, 'browser launch failed');
    throw await failLaunch(
      DELETE_REASONS.launchFailed,
      new AppError(502, 'browser_launch_failed', `The browser could not be started: ${observed.reason ?? observed.phase}`, { shouldRetry: false }),
    );
  }
  const now = deps.clock.now();
  let running: SessionRow | undefined;
  try {
    // Marked at the spawn already (the row as then, or undefined if deleted meanwhile); its failure is retried here.
    running = (await markedEarly?.catch(() => undefined)) ?? (await markRunning(deps.db, row.id, { agentUrl: observed.agentUrl, startedAt: now, now }));
  } catch (error) {
    // The caller gets an error, so nobody will ever use this browser: close it now. The row
    // (which cannot be marked ended either while the database is unreachable) stays
    // 'starting' until the reaper ends it as launch_interrupted.
    await runtime.terminate(row.id, { graceMs: 0 }).catch((e: unknown) => deps.log.error({ err: e, sessionId: row.id }, 'terminating an unrecorded launch failed'));
    throw error;
  }
  // Now that the agent answers: a telemetry PATCH made while it started reaches it.
  if (running) await catchUpTelemetry(deps, running, spec.telemetry);
  return running;
}

/**
 * Closes the browser (Browser.close, then a kill after the grace period) and marks the
 * row deleted. The runtime goes first: if it fails, the session stays live and a retry
 * (or the reaper) finishes the job, rather than a deleted row with a browser still running.
 */
export async function endSession(
  deps: AppDeps,
  row: Pick<SessionRow, 'id' | 'profile_save_changes'>,
  reason: string,
  options: { discardProfile?: boolean } = {},
): Promise<boolean> {
  const discardProfile = options.discardProfile === true;
  await deps.runtime.terminate(row.id, { graceMs: terminateGraceMs(row), ...(discardProfile ? { discardProfile } : {}) });
  const ended = await markDeleted(deps.db, row.id, reason, deps.clock.now());
  if (ended) deps.sessionEnds.ended(reason);
  deps.log.info({ sessionId: row.id, reason }, 'browser session ended');
  return ended;
}

/** Live sessions keep their project from being deleted. */
export const countProjectSessions: ProjectResourceCounter = async (db, projectId) => ({
  kind: 'browser_sessions',
  count: await countLiveProjectSessions(db, projectId),
});
