import type { Browser, Page } from 'playwright-core';
import type { AppDeps } from '../../../app-deps.js';
import { AppError } from '../../../http/errors.js';
import type { SessionRow } from '../../browsers/store.js';
import { changeCredential, createCredential } from '../../credentials/service.js';
import { totpCodeAt } from '../../credentials/totp.js';
import { findFlow, takePendingInput, updateRunningFlow } from '../flow-store.js';
import type { ConnectionRow, FlowView, LoginRequirements } from '../rows.js';
import type { FlowStatus, FlowStep } from '../schema.js';
import { connectionChannel } from '../service.js';
import { SUBMISSION_SEAL_CONTEXT, type Submission } from '../submission.js';
import { findConnectionById, scopeOfConnection, updateConnection } from '../store.js';
import { connect, firstPage, NAVIGATION_TIMEOUT_MS } from './flow-browser.js';
import { clickTarget, fillField, readLoginPage, submitStep, waitForSettled } from './page-model.js';
import type { LoginPageReading } from './page-types.js';
import { loginSecrets, SecretsUnavailable } from './secrets.js';
import { addRequirements, autoStep, GENERATED_TOTP, navigationAllowed, valuesToSave, viewOf, type PlannedStep, type Secrets } from './plan.js';

/** A login that needs more pages than this is going in circles. */
const MAX_STEPS = 25;
/**
 * How many times a person may answer again after the site refused what they typed (a
 * wrong password): the flow goes back to AWAITING_INPUT with the site's words as
 * website_error, and fails as login_rejected after this many refusals.
 */
export const MAX_REJECTED_ANSWERS = 3;

/** How a flow ended. */
export type Outcome =
  | { status: 'SUCCESS'; postLoginUrl: string }
  | { status: Exclude<FlowStatus, 'SUCCESS' | 'IN_PROGRESS'>; code: string; message: string; websiteError?: string | null };

class FlowStopped extends Error {
  constructor(readonly outcome: Outcome) {
    super(outcome.status);
  }
}

/** What the runner gives a driver: a wait a notification cuts short, and a stop request. */
export interface DriverSignals {
  waitForWake: (ms: number) => Promise<void>;
  stopRequested: () => Outcome | undefined;
}

/** Drives one flow's browser through the login, step by step. */
export class FlowDriver {
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
    private readonly signals: DriverSignals,
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

  /** The stored credential's or the provider's values; a provider that fails ends the flow with its reason. */
  private async secrets(row: ConnectionRow): Promise<Secrets | undefined> {
    try {
      return await loginSecrets(this.deps, row);
    } catch (error) {
      if (error instanceof SecretsUnavailable) throw new FlowStopped({ status: 'FAILED', code: error.code, message: error.message });
      throw error;
    }
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
    let answeredByPerson = false;
    let rejections = 0;
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
      // A person's answer the site refused is asked again (the page shows why); a stored credential's is not.
      if (submitted && reading.errorText && (!answeredByPerson || ++rejections >= MAX_REJECTED_ANSWERS)) {
        return { status: 'FAILED', code: 'login_rejected', message: 'The site refused what was submitted', websiteError: reading.errorText };
      }
      const view = viewOf(reading);
      let step = autoStep(view, secrets, row.sso_provider);
      answeredByPerson = !step;
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
      // The site's words were about the answer before this one.
      await this.setStep('SUBMITTING', view, { website_error: null });
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
      if (value === GENERATED_TOTP) value = totpCodeAt(secrets!.totpSecret!, this.deps.clock.now(), secrets!.totpOptions).code;
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
   * goes into the connection's credential, or a new one named after the profile and domain;
   * never when the connection names a provider's item.
   */
  async saveCredentials(row: ConnectionRow): Promise<void> {
    // A provider's credential stays in the provider: nothing of a login that used it is stored.
    if (!row.save_credentials || row.credential?.provider !== undefined || Object.keys(this.typed).length === 0) return;
    const scope = scopeOfConnection(row);
    if (row.credential_id) {
      await changeCredential(this.deps, scope, row.credential_id, { values: this.typed });
      return;
    }
    const base = `${row.profile_name}-${row.domain}`.slice(0, 240);
    for (let n = 1; n <= 20; n++) {
      const name = n === 1 ? base : `${base}-${n}`;
      try {
        const created = await createCredential(this.deps, scope, { name, domain: row.domain, values: this.typed });
        await updateConnection(this.deps.db, row.id, { credential: { name }, credential_id: created.row.id }, this.deps.clock.now());
        return;
      } catch (error) {
        if (error instanceof AppError && error.status === 409) continue;
        throw error;
      }
    }
  }
}
