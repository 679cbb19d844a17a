import type { Browser } from 'playwright-core';
import type { AppDeps } from '../../../app-deps.js';
import { AppError } from '../../../http/errors.js';
import { newId } from '../../../ids.js';
import type { ProjectScope } from '../../../scope.js';
import { createSession } from '../../browsers/service.js';
import { finishHealthCheck, insertHealthCheck } from '../history-store.js';
import { judgeReauth } from '../reauth.js';
import { connectionChannel, rescheduleHealthCheck } from '../service.js';
import { findConnectionById, scopeOfConnection, updateConnection } from '../store.js';
import { connect, endFlowBrowser, firstPage, NAVIGATION_TIMEOUT_MS } from './flow-browser.js';
import { readLoginPage, waitForSettled } from './page-model.js';

/** What a health check may do after it: start an unattended re-auth, unless the engine is stopping. */
export interface ReauthStarter {
  reauth: (scope: ProjectScope, connectionId: string) => Promise<unknown>;
  stopping: () => boolean;
}

/**
 * One scheduled health check: a browser on the profile opens the page the last login
 * ended on; a login form there means the site no longer treats the profile as logged in.
 * NEEDS_AUTH with auto_reauth and a usable credential starts an unattended re-auth.
 */
export async function runHealthCheck(deps: AppDeps, connectionId: string, then: ReauthStarter): Promise<void> {
  const row = await findConnectionById(deps.db, connectionId);
  if (!row || !row.health_checks) return;
  if (row.flow?.status === 'IN_PROGRESS') {
    // The flow decides the status; check again one interval later.
    await rescheduleHealthCheck(deps, deps.db, row);
    return;
  }
  const checkId = newId('mahc');
  await insertHealthCheck(deps.db, { id: checkId, connectionId, previousStatus: row.status, now: deps.clock.now() });
  await deps.events.publish(connectionChannel(connectionId), { id: connectionId });
  let status: 'AUTHENTICATED' | 'NEEDS_AUTH' | null = null;
  let sessionId: string | null = null;
  let failure: { code: string; message: string } | undefined;
  try {
    const session = await createSession(deps, scopeOfConnection(row), {
      profile: { id: row.profile_id, save_changes: false },
      ...(row.proxy_id ? { proxy_id: row.proxy_id } : {}),
      headless: true,
      timeout_seconds: 600,
      tags: { managed_auth: connectionId, auth_health_check: checkId },
    });
    sessionId = session.id;
    let browser: Browser | undefined;
    try {
      browser = await connect(session, deps.agentTokens);
      const page = await firstPage(browser);
      const target = row.post_login_url ?? row.login_url ?? `https://${row.domain}/`;
      await page.goto(target, { waitUntil: 'domcontentloaded', timeout: NAVIGATION_TIMEOUT_MS });
      await waitForSettled(page, 10_000);
      const reading = await readLoginPage(page);
      status = reading.isLoginStep || (reading.signInLinkSelector !== null && !reading.loggedInHints) ? 'NEEDS_AUTH' : 'AUTHENTICATED';
    } finally {
      await browser?.close().catch(() => undefined);
      await endFlowBrowser(deps, session.id, false);
    }
  } catch (error) {
    failure = { code: error instanceof AppError ? error.code : 'health_check_failed', message: error instanceof Error ? error.message : String(error) };
    deps.log.warn({ err: error, connectionId }, 'auth health check could not run');
  }
  const now = deps.clock.now();
  await finishHealthCheck(deps.db, checkId, { status, browserSessionId: sessionId, ...(failure ? { errorCode: failure.code, errorMessage: failure.message } : {}), now });
  const current = await findConnectionById(deps.db, connectionId);
  if (!current) return;
  if (status) await updateConnection(deps.db, connectionId, { status, last_auth_check_at: now }, now);
  await deps.events.publish(connectionChannel(connectionId), { id: connectionId });
  deps.log.info({ connectionId, status, previous: row.status }, 'auth health check finished');
  await rescheduleHealthCheck(deps, deps.db, current);
  if (status === 'NEEDS_AUTH' && current.auto_reauth && judgeReauth(current).can && !then.stopping()) {
    await then.reauth(scopeOfConnection(current), connectionId).catch((error: unknown) =>
      deps.log.warn({ err: error, connectionId }, 'automatic re-auth could not start'),
    );
  }
}
