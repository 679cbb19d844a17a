import { chromium, type Browser, type Page } from 'playwright-core';
import type { AppDeps } from '../../../app-deps.js';
import { agentEndpoint, agentHeaders, agentWsUrl, type AgentTokens } from '../../../../../contract/agent-client.js';
import type { AuthContext } from '../../../http/auth-context.js';
import { AppError } from '../../../http/errors.js';
import { newId } from '../../../ids.js';
import { startJobQueue, type JobQueue } from '../../../jobs/queue.js';
import { createSession, endSession } from '../../browsers/service.js';
import { findLiveSessionById, type SessionRow } from '../../browsers/store.js';
import { changeCredential, createCredential, openCredentialSecrets } from '../../credentials/service.js';
import { totpCodeAt } from '../../credentials/totp.js';
import { judgeReauth } from '../reauth.js';
import type { TelemetryRequest } from '../../browsers/telemetry.js';
import type { FlowStatus, FlowStep } from '../schema.js';
import {
  beginFlow,
  connectionChannel,
  HEALTH_CHECK_TASK,
  rescheduleHealthCheck,
  SUBMISSION_SEAL_CONTEXT,
  type Submission,
} from '../service.js';
import {
  failOrphanedFlows,
  findConnectionById,
  findFlow,
  finishHealthCheck,
  insertHealthCheck,
  takePendingInput,
  updateConnection,
  updateRunningFlow,
  type ConnectionRow,
  type LoginRequirements,
  type Scope,
} from '../store.js';
import type { FlowView } from '../view.js';
import { clickTarget, fillField, readLoginPage, submitStep, waitForSettled } from './page-model.js';
import type { LoginPageReading } from './page-types.js';
import { addRequirements, autoStep, GENERATED_TOTP, navigationAllowed, valuesToSave, viewOf, type PlannedStep, type Secrets } from './plan.js';

/** What one login may use instead of the connection's defaults (POST …/login body). */
export interface FlowOverrides {
  proxyId?: string | undefined;
  telemetry?: TelemetryRequest | null | undefined;
}

/** A driver beats this often; a flow silent for STALE_AFTER_MS is failed by any replica. */
export const HEARTBEAT_MS = 5_000;
export const STALE_AFTER_MS = 30_000;
/** A login that needs more pages than this is going in circles. */
const MAX_STEPS = 25;
const NAVIGATION_TIMEOUT_MS = 30_000;
export const FLOW_SESSION_END_REASON = 'auth_flow_finished';

type Outcome =
  | { status: 'SUCCESS'; postLoginUrl: string }
  | { status: Exclude<FlowStatus, 'SUCCESS' | 'IN_PROGRESS'>; code: string; message: string; websiteError?: string | null };

class FlowStopped extends Error {
  constructor(readonly outcome: Outcome) {
    super(outcome.status);
  }
}

/** The auth context a flow acts with when it writes credentials on the connection's behalf. */
const systemAuth = (row: Pick<ConnectionRow, 'org_id' | 'project_id'>): AuthContext => ({
  orgId: row.org_id,
  apiKey: { id: 'system', name: 'managed-auth', projectId: row.project_id },
  project: { id: row.project_id, name: row.project_id },
});

const scopeOfRow = (row: Pick<ConnectionRow, 'org_id' | 'project_id'>): Scope => ({ orgId: row.org_id, projectId: row.project_id });

/**
 * Runs the login flows, health checks and re-auths of this replica. A flow is driven by the
 * replica that started it (its browser and CDP connection live here); its state is in
 * Postgres, so any replica serves its reads, submissions and event streams.
 */
export class AuthFlows {
  readonly replicaId = newId('replica');
  private readonly running = new Map<string, { wake: () => void; stop: (outcome: Outcome) => void; done: Promise<void> }>();
  private heartbeat: NodeJS.Timeout | undefined;
  private queue: JobQueue | undefined;
  private stopped = false;

  constructor(private readonly deps: AppDeps) {}

  async start(options: { jobs?: boolean; jobPollIntervalMs?: number } = {}): Promise<void> {
    this.heartbeat = setInterval(() => void this.beat(), HEARTBEAT_MS);
    this.heartbeat.unref();
    await this.beat();
    if (options.jobs !== false) {
      this.queue = await startJobQueue(
        this.deps.db,
        this.deps.log,
        { [HEALTH_CHECK_TASK]: (payload) => this.healthCheck((payload as { connection_id: string }).connection_id) },
        { concurrency: 2, ...(options.jobPollIntervalMs ? { pollIntervalMs: options.jobPollIntervalMs } : {}) },
      );
    }
  }

  /** Stops taking jobs and ends this replica's flows (their browsers close; the flows fail). */
  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.heartbeat);
    await this.queue?.stop();
    for (const run of this.running.values()) run.stop({ status: 'FAILED', code: 'flow_interrupted', message: 'The service stopped while the login flow ran' });
    await Promise.all([...this.running.values()].map((r) => r.done));
  }

  /** Keeps this replica's flows alive and fails flows whose replica went silent. */
  private async beat(): Promise<void> {
    const now = this.deps.clock.now();
    try {
      if (this.running.size > 0) {
        await this.deps.db.query(`UPDATE auth_flows SET heartbeat_at = $2 WHERE id = ANY($1) AND status = 'IN_PROGRESS'`, [[...this.running.keys()], now]);
      }
      const orphans = await failOrphanedFlows(this.deps.db, new Date(now.getTime() - STALE_AFTER_MS), now);
      for (const orphan of orphans) {
        this.deps.log.warn({ flowId: orphan.id, connectionId: orphan.connection_id }, 'auth flow failed: its driver stopped');
        await this.deps.events.publish(connectionChannel(orphan.connection_id), { id: orphan.connection_id });
        if (orphan.browser_session_id) await this.endBrowser(orphan.browser_session_id, false);
      }
    } catch (error) {
      this.deps.log.warn({ err: error }, 'auth flow heartbeat failed');
    }
  }

  // ---- starting flows ---------------------------------------------------------------

  /**
   * Starts a login (or re-auth) flow: the flow row, then its browser on the connection's
   * profile (so caps, a profile in use and launch failures are the caller's errors), then
   * the driver in the background.
   */
  async begin(scope: Scope, connectionId: string, type: 'LOGIN' | 'REAUTH', input: FlowOverrides = {}) {
    if (this.stopped) throw new AppError(503, 'service_stopping', 'The service is shutting down');
    const started = await beginFlow(this.deps, scope, connectionId, type, this.replicaId);
    const { row, flowId } = started;
    let session: SessionRow;
    try {
      session = await createSession(this.deps, scope, {
        profile: { id: row.profile_id, save_changes: true },
        ...((input.proxyId ?? row.proxy_id) ? { proxy_id: (input.proxyId ?? row.proxy_id)! } : {}),
        ...((input.telemetry ?? row.browser_telemetry) ? { telemetry: (input.telemetry ?? row.browser_telemetry)! } : {}),
        headless: false,
        timeout_seconds: 3600,
        tags: { managed_auth: connectionId, auth_flow: flowId },
      });
    } catch (error) {
      const code = error instanceof AppError ? error.code : 'browser_failed';
      const message = error instanceof Error ? error.message : String(error);
      await this.finish(row, flowId, { status: 'FAILED', code, message: `The flow’s browser could not start: ${message}` });
      throw error;
    }
    await updateRunningFlow(this.deps.db, flowId, { browser_session_id: session.id }, this.deps.clock.now());
    await this.deps.events.publish(connectionChannel(connectionId), { id: connectionId });
    this.drive(connectionId, flowId, session, type);
    return { ...started, sessionId: session.id };
  }

  private drive(connectionId: string, flowId: string, session: SessionRow, type: 'LOGIN' | 'REAUTH'): void {
    let wake = () => {};
    let stopWith: Outcome | undefined;
    const signals = { wake: () => wake(), stop: (outcome: Outcome) => ((stopWith ??= outcome), wake()) };
    const waitForWake = (ms: number) =>
      new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, ms);
        wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    const driver = new FlowDriver(this.deps, connectionId, flowId, session, type, {
      waitForWake,
      stopRequested: () => stopWith,
    });
    const done = (async () => {
      const unsubscribe = await this.deps.events
        .subscribe(connectionChannel(connectionId), signals.wake, signals.wake)
        .catch(() => async () => {});
      try {
        const outcome = await driver.run();
        const row = await findConnectionById(this.deps.db, connectionId);
        await this.finish(row, flowId, outcome, { driver, session });
      } catch (error) {
        this.deps.log.error({ err: error, flowId }, 'auth flow driver failed');
        const row = await findConnectionById(this.deps.db, connectionId).catch(() => undefined);
        await this.finish(row, flowId, { status: 'FAILED', code: 'internal_error', message: 'The login flow failed unexpectedly' }, { driver, session }).catch(
          () => undefined,
        );
      } finally {
        await unsubscribe().catch(() => undefined);
        this.running.delete(flowId);
      }
    })();
    this.running.set(flowId, { ...signals, done });
  }

  /**
   * Ends a flow: on success the browser closes saving the profile first (so SUCCESS means
   * the profile is usable), credentials are saved and the connection is AUTHENTICATED; any
   * other end closes the browser without saving.
   */
  private async finish(
    row: ConnectionRow | undefined,
    flowId: string,
    outcome: Outcome,
    run?: { driver: FlowDriver; session: SessionRow },
  ): Promise<void> {
    const deps = this.deps;
    const success = outcome.status === 'SUCCESS';
    if (run) {
      await run.driver.disconnect();
      await this.endBrowser(run.session.id, success && row !== undefined);
    }
    const now = deps.clock.now();
    if (!row) return; // deleted: the rows are gone, the stream said CANCELED
    if (success && run) {
      await run.driver.saveCredentials(row).catch((error: unknown) => deps.log.warn({ err: error, flowId }, 'saving the login’s credentials failed'));
      await updateConnection(
        deps.db,
        row.id,
        {
          status: 'AUTHENTICATED',
          last_auth_check_at: now,
          post_login_url: outcome.postLoginUrl,
          sso_provider: run.driver.requirements.ssoProvider,
          login_requirements: run.driver.requirements,
        },
        now,
      );
      await rescheduleHealthCheck(deps, deps.db, row);
    }
    await updateRunningFlow(
      deps.db,
      flowId,
      {
        status: outcome.status,
        step: 'COMPLETED',
        finished_at: now,
        ...(outcome.status === 'SUCCESS'
          ? { post_login_url: outcome.postLoginUrl, error_code: null, error_message: null, website_error: null }
          : { error_code: outcome.code, error_message: outcome.message, website_error: outcome.websiteError ?? null }),
      },
      now,
    );
    await deps.db.query('UPDATE auth_flows SET pending_input = NULL WHERE id = $1', [flowId]);
    await deps.events.publish(connectionChannel(row.id), { id: row.id });
    deps.log.info({ flowId, connectionId: row.id, status: outcome.status, ...(outcome.status !== 'SUCCESS' ? { code: outcome.code } : {}) }, 'auth flow finished');
  }

  private async endBrowser(sessionId: string, saveProfile: boolean): Promise<void> {
    const row = await findLiveSessionById(this.deps.db, sessionId).catch(() => undefined);
    if (!row) return;
    await endSession(this.deps, row, FLOW_SESSION_END_REASON, { discardProfile: !saveProfile }).catch((error: unknown) =>
      this.deps.log.warn({ err: error, sessionId }, 'closing an auth flow’s browser failed'),
    );
  }

  /** Wakes the driver of a flow on this replica (a submission or a delete arrived). */
  wake(flowId: string): void {
    this.running.get(flowId)?.wake();
  }

  // ---- health checks -----------------------------------------------------------------

  /**
   * One scheduled health check: a browser on the profile opens the page the last login
   * ended on; a login form there means the site no longer treats the profile as logged in.
   * NEEDS_AUTH with auto_reauth and a usable credential starts an unattended re-auth.
   */
  async healthCheck(connectionId: string): Promise<void> {
    const deps = this.deps;
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
      const session = await createSession(deps, scopeOfRow(row), {
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
        await this.endBrowser(session.id, false);
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
    if (status === 'NEEDS_AUTH' && current.auto_reauth && judgeReauth(current).can && !this.stopped) {
      await this.begin(scopeOfRow(current), connectionId, 'REAUTH').catch((error: unknown) =>
        deps.log.warn({ err: error, connectionId }, 'automatic re-auth could not start'),
      );
    }
  }
}

/** Straight to the agent's /cdp, with its token. */
async function connect(session: SessionRow, tokens: AgentTokens): Promise<Browser> {
  if (!session.agent_url) throw new Error('the browser has no agent address');
  const agent = agentEndpoint(tokens, session.id, session.agent_url);
  return chromium.connectOverCDP(agentWsUrl(agent, '/cdp'), { timeout: NAVIGATION_TIMEOUT_MS, headers: agentHeaders(agent) });
}

async function firstPage(browser: Browser): Promise<Page> {
  const context = browser.contexts()[0] ?? (await browser.newContext());
  return context.pages()[0] ?? (await context.newPage());
}

/** Drives one flow's browser through the login, step by step. */
class FlowDriver {
  readonly requirements: LoginRequirements = { fieldTypes: [], mfaType: null, ssoProvider: null };
  private readonly typed: Record<string, string> = {};
  private browser: Browser | undefined;
  private blockedUrl: string | undefined;

  constructor(
    private readonly deps: AppDeps,
    private readonly connectionId: string,
    private readonly flowId: string,
    private readonly session: SessionRow,
    private readonly type: 'LOGIN' | 'REAUTH',
    private readonly signals: { waitForWake: (ms: number) => Promise<void>; stopRequested: () => Outcome | undefined },
  ) {}

  async disconnect(): Promise<void> {
    await this.browser?.close().catch(() => undefined);
    this.browser = undefined;
  }

  /** Writes a step; a flow no longer running (deleted, or failed by a sweep) stops here. */
  private async setStep(step: FlowStep, view?: FlowView, extra: { website_error?: string | null } = {}): Promise<void> {
    const now = this.deps.clock.now();
    const ok = await updateRunningFlow(this.deps.db, this.flowId, { step, ...(view ? { view } : {}), ...extra }, now);
    if (!ok) throw new FlowStopped({ status: 'CANCELED', code: 'flow_canceled', message: 'The login flow was canceled' });
    await this.deps.events.publish(connectionChannel(this.connectionId), { id: this.connectionId });
  }

  private async checkAlive(): Promise<void> {
    const requested = this.signals.stopRequested();
    if (requested) throw new FlowStopped(requested);
    const flow = await findFlow(this.deps.db, this.flowId);
    if (!flow || flow.status !== 'IN_PROGRESS') throw new FlowStopped({ status: 'CANCELED', code: 'flow_canceled', message: 'The login flow was canceled' });
    if (flow.expires_at.getTime() <= this.deps.clock.now().getTime()) {
      throw new FlowStopped({ status: 'EXPIRED', code: 'flow_expired', message: 'The login flow expired before it finished' });
    }
  }

  private async secrets(row: ConnectionRow): Promise<Secrets | undefined> {
    if (!row.credential_id) return undefined;
    const opened = await openCredentialSecrets(this.deps, scopeOfRow(row), row.credential_id);
    if (!opened) return undefined;
    return { values: opened.values, totpSecret: opened.totpSecret, ssoProvider: opened.row.sso_provider };
  }

  async run(): Promise<Outcome> {
    try {
      return await this.steps();
    } catch (error) {
      if (error instanceof FlowStopped) return error.outcome;
      throw error;
    }
  }

  private async steps(): Promise<Outcome> {
    const row = await findConnectionById(this.deps.db, this.connectionId);
    if (!row) return { status: 'CANCELED', code: 'flow_canceled', message: 'The auth connection was deleted' };
    const secrets = await this.secrets(row);
    this.browser = await connect(this.session, this.deps.agentTokens);
    const page = await firstPage(this.browser);
    await this.guardNavigations(page, row);

    await this.setStep('DISCOVERING');
    await this.open(page, row);
    let submitted = false;
    let followedSignIn = false;
    for (let n = 0; n < MAX_STEPS; n++) {
      await this.checkAlive();
      this.checkBlocked();
      const reading = await readLoginPage(page);
      this.checkBlocked();
      if (!reading.isLoginStep) {
        if (submitted && reading.errorText && !reading.loggedInHints) {
          return { status: 'FAILED', code: 'login_rejected', message: 'The site refused the login', websiteError: reading.errorText };
        }
        if (submitted || reading.loggedInHints) return { status: 'SUCCESS', postLoginUrl: page.url() };
        if (reading.signInLinkSelector && !followedSignIn) {
          followedSignIn = true;
          await clickTarget(page, reading.signInLinkSelector);
          await waitForSettled(page, 15_000);
          continue;
        }
        return { status: 'FAILED', code: 'login_page_not_found', message: `No login form was found at ${page.url()}`, websiteError: reading.errorText };
      }
      if (submitted && reading.errorText) {
        return { status: 'FAILED', code: 'login_rejected', message: 'The site refused what was submitted', websiteError: reading.errorText };
      }
      const view = viewOf(reading);
      let step = autoStep(view, secrets, row.sso_provider);
      if (!step) {
        if (this.type === 'REAUTH') {
          const needs = (view.fields ?? []).map((f) => f.label ?? f.id).join(', ') || 'a choice';
          return { status: 'FAILED', code: 'reauth_needs_input', message: `Re-authentication needs a person: the site asks for ${needs}` };
        }
        await this.setStep('AWAITING_INPUT', view, { website_error: reading.errorText });
        step = await this.awaitInput();
        for (const [id, value] of Object.entries(valuesToSave(view, step))) this.typed[id] = value;
      }
      addRequirements(this.requirements, view, step);
      await this.setStep('SUBMITTING', view);
      await this.apply(page, view, reading, step, secrets);
      submitted = true;
      await this.setStep('DISCOVERING');
    }
    return { status: 'FAILED', code: 'too_many_steps', message: `The login did not finish within ${MAX_STEPS} pages` };
  }

  /**
   * Only pages of the site, its allowed domains and well-known IdPs may open in the flow's
   * tab; another top-level navigation is failed before it leaves the browser, and the
   * step loop ends the flow. CDP Fetch rather than Playwright's route: routes do not see
   * the hops of a redirect, and an off-site redirect after login is the usual way out.
   */
  private async guardNavigations(page: Page, row: ConnectionRow): Promise<void> {
    const cdp = await page.context().newCDPSession(page);
    const { frameTree } = await cdp.send('Page.getFrameTree');
    const mainFrameId = frameTree.frame.id;
    cdp.on('Fetch.requestPaused', (event) => {
      const allowed = event.frameId !== mainFrameId || navigationAllowed(event.request.url, row.domain, row.allowed_domains);
      if (allowed) {
        cdp.send('Fetch.continueRequest', { requestId: event.requestId }).catch(() => undefined);
        return;
      }
      this.blockedUrl ??= event.request.url;
      this.deps.log.warn({ flowId: this.flowId, host: new URL(event.request.url).host }, 'auth flow navigation blocked: domain not allowed');
      cdp.send('Fetch.failRequest', { requestId: event.requestId, errorReason: 'BlockedByClient' }).catch(() => undefined);
    });
    await cdp.send('Fetch.enable', { patterns: [{ urlPattern: '*', resourceType: 'Document', requestStage: 'Request' }] });
  }

  private checkBlocked(): void {
    if (this.blockedUrl) {
      throw new FlowStopped({
        status: 'FAILED',
        code: 'domain_not_allowed',
        message: `The login tried to open ${new URL(this.blockedUrl).host}, which is not among the connection's domains; add it to allowed_domains if it is expected`,
      });
    }
  }

  /** The login page: login_url, else the domain's home page over https, then http. */
  private async open(page: Page, row: ConnectionRow): Promise<void> {
    const targets = row.login_url ? [row.login_url] : [`https://${row.domain}/`, `http://${row.domain}/`];
    let lastError: unknown;
    for (const target of targets) {
      try {
        await page.goto(target, { waitUntil: 'domcontentloaded', timeout: NAVIGATION_TIMEOUT_MS });
        await waitForSettled(page, 10_000);
        return;
      } catch (error) {
        lastError = error;
        this.checkBlocked();
      }
    }
    throw new FlowStopped({
      status: 'FAILED',
      code: 'login_page_unreachable',
      message: `The login page could not be opened: ${lastError instanceof Error ? lastError.message.split('\n')[0] : String(lastError)}`,
    });
  }

  /** Waits for a submission (sealed in the flow row by any replica), the expiry or a cancel. */
  private async awaitInput(): Promise<PlannedStep> {
    for (;;) {
      await this.checkAlive();
      const sealed = await takePendingInput(this.deps.db, this.flowId);
      if (sealed) {
        const submission = JSON.parse(this.deps.sealer.open(sealed, `${SUBMISSION_SEAL_CONTEXT}:${this.flowId}`)) as Submission;
        return { values: submission.values, ...(submission.choiceId ? { choiceId: submission.choiceId } : {}) };
      }
      const flow = await findFlow(this.deps.db, this.flowId);
      const untilExpiry = flow ? flow.expires_at.getTime() - this.deps.clock.now().getTime() : 0;
      // Woken by the connection's notifications; the timeout covers a missed one.
      await this.signals.waitForWake(Math.max(50, Math.min(untilExpiry, 2_000)));
    }
  }

  private async apply(page: Page, view: FlowView, reading: LoginPageReading, step: PlannedStep, secrets: Secrets | undefined): Promise<void> {
    const fields = view.fields ?? [];
    for (const field of fields) {
      let value = step.values[field.id];
      if (value === undefined || !field.observed_selector) continue;
      if (value === GENERATED_TOTP) value = totpCodeAt(secrets!.totpSecret!, this.deps.clock.now()).code;
      await fillField(page, field.observed_selector, value);
    }
    const choice = (view.choices ?? []).find((c) => c.id === step.choiceId);
    if (choice?.observed_selector) {
      await clickTarget(page, choice.observed_selector);
      await waitForSettled(page, 15_000);
    } else {
      await submitStep(page, reading);
    }
  }

  /**
   * save_credentials: what the person typed (identifiers, passwords; never one-time codes)
   * goes into the connection's credential, or a new one named after the profile and domain.
   */
  async saveCredentials(row: ConnectionRow): Promise<void> {
    if (!row.save_credentials || Object.keys(this.typed).length === 0) return;
    const auth = systemAuth(row);
    if (row.credential_id) {
      await changeCredential(this.deps, auth, row.credential_id, { values: this.typed });
      return;
    }
    const base = `${row.profile_name}-${row.domain}`.slice(0, 240);
    for (let n = 1; n <= 20; n++) {
      const name = n === 1 ? base : `${base}-${n}`;
      try {
        const created = await createCredential(this.deps, auth, { name, domain: row.domain, values: this.typed });
        await updateConnection(this.deps.db, row.id, { credential: { name }, credential_id: created.row.id }, this.deps.clock.now());
        return;
      } catch (error) {
        if (error instanceof AppError && error.status === 409) continue;
        throw error;
      }
    }
  }
}

/** One flow manager per app (the routes, the job queue and shutdown share it). */
const managers = new WeakMap<AppDeps, AuthFlows>();
export function authFlows(deps: AppDeps): AuthFlows {
  let manager = managers.get(deps);
  if (!manager) {
    manager = new AuthFlows(deps);
    managers.set(deps, manager);
  }
  return manager;
}
