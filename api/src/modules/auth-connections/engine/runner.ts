import type { AppDeps } from '../../../app-deps.js';
import { AppError } from '../../../http/errors.js';
import type { ProjectScope } from '../../../scope.js';
import { createSession } from '../../browsers/service.js';
import type { SessionRow } from '../../browsers/store.js';
import type { TelemetryRequest } from '../../browsers/telemetry.js';
import { beatFlows, clearPendingInput, failOrphanedFlows, updateRunningFlow } from '../flow-store.js';
import type { ConnectionRow } from '../rows.js';
import { beginFlow, connectionChannel, rescheduleHealthCheck } from '../service.js';
import { findConnectionById, updateConnection } from '../store.js';
import { FlowDriver, type Outcome } from './driver.js';
import { endFlowBrowser } from './flow-browser.js';

/** What one login may use instead of the connection's defaults (POST …/login body). */
export interface FlowOverrides {
  proxyId?: string | undefined;
  telemetry?: TelemetryRequest | null | undefined;
}

/** A driver beats this often; a flow silent for STALE_AFTER_MS is failed by any replica. */
export const HEARTBEAT_MS = 5_000;
export const STALE_AFTER_MS = 30_000;

/**
 * Starts the flows of this replica and drives each to its end. A flow is driven by the
 * replica that started it (its browser and CDP connection live here); its state is in
 * Postgres, so any replica serves its reads, submissions and event streams.
 */
export class FlowRunner {
  private readonly running = new Map<string, { wake: () => void; stop: (outcome: Outcome) => void; done: Promise<void> }>();

  constructor(
    private readonly deps: AppDeps,
    private readonly replicaId: string,
  ) {}

  /** Keeps this replica's flows alive and fails flows whose replica went silent. */
  async heartbeat(): Promise<void> {
    const now = this.deps.clock.now();
    try {
      if (this.running.size > 0) await beatFlows(this.deps.db, [...this.running.keys()], now);
      const orphans = await failOrphanedFlows(this.deps.db, new Date(now.getTime() - STALE_AFTER_MS), now);
      for (const orphan of orphans) {
        this.deps.log.warn({ flowId: orphan.id, connectionId: orphan.connection_id }, 'auth flow failed: its driver stopped');
        await this.deps.events.publish(connectionChannel(orphan.connection_id), { id: orphan.connection_id });
        if (orphan.browser_session_id) await endFlowBrowser(this.deps, orphan.browser_session_id, false);
      }
    } catch (error) {
      this.deps.log.warn({ err: error }, 'auth flow heartbeat failed');
    }
  }

  /** Ends this replica's flows (their browsers close; the flows fail) and waits for them. */
  async stopAll(): Promise<void> {
    for (const run of this.running.values()) run.stop({ status: 'FAILED', code: 'flow_interrupted', message: 'The service stopped while the login flow ran' });
    await Promise.all([...this.running.values()].map((r) => r.done));
  }

  /**
   * Starts a login (or re-auth) flow: the flow row, then its browser on the connection's
   * profile (so caps, a profile in use and launch failures are the caller's errors), then
   * the driver in the background.
   */
  async begin(scope: ProjectScope, connectionId: string, type: 'LOGIN' | 'REAUTH', input: FlowOverrides = {}) {
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

  /** Wakes the driver of a flow on this replica (a submission or a delete arrived). */
  wake(flowId: string): void {
    this.running.get(flowId)?.wake();
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
      await endFlowBrowser(deps, run.session.id, success && row !== undefined);
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
    await clearPendingInput(deps.db, flowId);
    await deps.events.publish(connectionChannel(row.id), { id: row.id });
    deps.log.info({ flowId, connectionId: row.id, status: outcome.status, ...(outcome.status !== 'SUCCESS' ? { code: outcome.code } : {}) }, 'auth flow finished');
  }
}
