import type { V1Job } from '@kubernetes/client-node';
import type { AppDeps } from '../../app-deps.js';
import { apiErrorCode } from '../../../../lib/k8s-errors.js';
import type { ProjectScope } from '../../scope.js';
import { failLostRuns, finishRun } from '../invocations/run-finish.js';
import { createAppJobClient, type AppJobClient, type FinishedOutcome } from './app-job-client.js';
import {
  buildJob,
  buildJobName,
  COMPONENT_LABEL,
  DEFAULT_STARTUP_ALLOWANCE_SECONDS,
  DEPLOYMENT_ID_LABEL,
  INVOCATION_ID_LABEL,
  runJob,
  runJobName,
  type AppJobOptions,
  type RunJobInput,
} from './app-jobs.js';
import { deleteBlobs } from './blob-store.js';
import { recordBuildFailure } from './build-finish.js';
import { findDeploymentById } from './deployments-store.js';
import { issueAppJobToken, revokeAppJobToken, revokeAppJobTokens } from './job-tokens.js';
import type { AppsSettings } from './settings.js';

/**
 * Kubernetes mode's builds and runs (docs/apps.md, "Kubernetes mode"): each a Job of the
 * runner image whose pod fetches its input from the API and reports back with a token of
 * its own (internal routes). This replica creates the Jobs of the requests it serves; every
 * replica watches every app Job and records how the ones that ended without a report
 * ended, so a replica that dies mid-build leaves nothing unrecorded. A sweep every 30 s
 * starts builds whose replica died before creating their Job and fails builds and runs
 * whose tokens expired without a report (a Job that vanished while no replica watched).
 */

/** A token lives past its Job's deadline by this much: the report of a pod at its deadline still lands. */
const TOKEN_MARGIN_MS = 120_000;
/** A queued deployment or invocation with no Job token this long after its creation lost its creator. */
const ORPHAN_MS = 60_000;
const SWEEP_MS = 30_000;

export const BUILD_JOB_SILENT = 'The build Job ended without reporting its result';
export const RUN_JOB_SILENT = 'The run Job ended without reporting a result';

type KubernetesApps = NonNullable<AppsSettings['kubernetes']>;

export class KubeAppJobs {
  private client: AppJobClient | undefined;
  private timer: NodeJS.Timeout | undefined;
  private sweeping: Promise<void> | undefined;

  constructor(
    private readonly deps: AppDeps,
    private readonly settings: AppsSettings,
    private readonly kubernetes: KubernetesApps,
  ) {}

  start(): void {
    if (this.client) return;
    this.client = createAppJobClient({
      config: this.kubernetes.kubeConfig,
      namespace: this.kubernetes.jobs.namespace,
      onOutcome: (job, outcome) => void this.ended(job, outcome),
      log: this.deps.log,
    });
    this.timer = setInterval(() => void this.sweep(), SWEEP_MS);
    this.timer.unref();
    this.deps.shutdown.addEventListener('abort', () => void this.stop(), { once: true });
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.sweeping;
    await this.client?.close();
  }

  /** The Job watch's first list is in (tests wait for it). */
  ready(): Promise<void> {
    return this.client?.ready() ?? Promise.resolve();
  }

  private options(): AppJobOptions {
    const apiUrl = this.deps.settings.internalUrl;
    if (!apiUrl) throw new Error('the API\'s internal URL is not known yet');
    return { ...this.kubernetes.jobs, apiUrl };
  }

  private jobs(): AppJobClient {
    if (!this.client) throw new Error('the app Job client is not started');
    return this.client;
  }

  /** The build queue's interface: a deployment was created (its git token for the pod's fetch). */
  enqueued(id: string, gitToken?: string): void {
    void this.startBuild(id, gitToken);
  }

  /** A delete: its build Job goes (and with it its pod and Secret). */
  abort(id: string): void {
    void revokeAppJobTokens(this.deps.db, 'build', id, this.deps.clock.now())
      .then(() => this.jobs().cancel(buildJobName(id)))
      .catch((error: unknown) => this.deps.log.warn({ err: error, deploymentId: id }, 'cancelling a build Job failed'));
  }

  async startBuild(id: string, gitToken?: string): Promise<void> {
    const row = await findDeploymentById(this.deps.db, id);
    if (row?.status !== 'queued') return;
    const now = this.deps.clock.now();
    const scope = { orgId: row.org_id, projectId: row.project_id };
    const deadlineMs = this.settings.buildTimeoutMs + DEFAULT_STARTUP_ALLOWANCE_SECONDS * 1000;
    let token: string | undefined;
    try {
      token = await issueAppJobToken(this.deps.db, { kind: 'build', subjectId: id, scope, now, expiresAt: new Date(now.getTime() + deadlineMs + TOKEN_MARGIN_MS), gitToken, sealer: this.deps.sealer });
      await this.jobs().start(buildJob({ deploymentId: id, buildTimeoutMs: this.settings.buildTimeoutMs }, this.options()), token);
    } catch (error) {
      if (token) await revokeAppJobToken(this.deps.db, token, now).catch(() => undefined);
      // Another replica's sweep made it first: that Job builds it.
      if (apiErrorCode(error) === 409) return;
      this.deps.log.error({ err: error, deploymentId: id }, 'creating a build Job failed');
      if (await recordBuildFailure(this.deps, id, `The build Job could not be created: ${messageOf(error)}`, [])) await deleteBlobs(this.deps.db, id).catch(() => undefined);
    }
  }

  /** Starts an invocation's run Job; throws when it cannot be created (the caller fails the run). */
  async startRun(input: RunJobInput, scope: ProjectScope): Promise<void> {
    const now = this.deps.clock.now();
    const deadlineMs = input.timeoutMs + DEFAULT_STARTUP_ALLOWANCE_SECONDS * 1000;
    const token = await issueAppJobToken(this.deps.db, { kind: 'run', subjectId: input.invocationId, scope, now, expiresAt: new Date(now.getTime() + deadlineMs + TOKEN_MARGIN_MS), sealer: this.deps.sealer });
    try {
      await this.jobs().start(runJob(input, this.options()), token);
    } catch (error) {
      await revokeAppJobToken(this.deps.db, token, now).catch(() => undefined);
      throw error;
    }
  }

  /** The run ended from outside (PATCH, a delete): its Job goes. */
  async cancelRun(invocationId: string): Promise<void> {
    await this.jobs().cancel(runJobName(invocationId));
  }

  /** A Job ended or vanished: what it means for its deployment or invocation, unless its pod reported first. */
  private async ended(job: V1Job, outcome: FinishedOutcome): Promise<void> {
    const component = job.metadata?.labels?.[COMPONENT_LABEL];
    const annotations = job.metadata?.annotations ?? {};
    try {
      if (component === 'app-build' && annotations[DEPLOYMENT_ID_LABEL]) {
        const id = annotations[DEPLOYMENT_ID_LABEL];
        const reason = outcome.state === 'failed' ? `The build Job failed: ${outcome.reason}` : BUILD_JOB_SILENT;
        if (await recordBuildFailure(this.deps, id, reason, [])) await deleteBlobs(this.deps.db, id);
        await revokeAppJobTokens(this.deps.db, 'build', id, this.deps.clock.now());
      } else if (component === 'app-run' && annotations[INVOCATION_ID_LABEL]) {
        const id = annotations[INVOCATION_ID_LABEL];
        const scope = await invocationScope(this.deps, id);
        if (!scope) return;
        const reason = outcome.state === 'failed' ? `The run Job failed: ${outcome.reason}` : RUN_JOB_SILENT;
        await finishRun(this.deps, scope, id, { ok: false, error: reason });
      }
    } catch (error) {
      this.deps.log.error({ err: error, job: job.metadata?.name }, 'recording how an app Job ended failed');
    }
  }

  private sweep(): Promise<void> {
    this.sweeping ??= this.sweepOnce()
      .catch((error: unknown) => this.deps.log.warn({ err: error }, 'sweeping app Jobs failed'))
      .finally(() => (this.sweeping = undefined));
    return this.sweeping;
  }

  private async sweepOnce(): Promise<void> {
    const now = this.deps.clock.now();
    const { rows } = await this.deps.db.query<{ id: string; status: string; had_token: boolean }>(
      `SELECT d.id, d.status, EXISTS (SELECT 1 FROM app_job_tokens t WHERE t.kind = 'build' AND t.subject_id = d.id) AS had_token
         FROM deployments d
        WHERE d.deleted_at IS NULL AND d.status IN ('queued', 'in_progress')
          AND NOT EXISTS (SELECT 1 FROM app_job_tokens t WHERE t.kind = 'build' AND t.subject_id = d.id AND t.revoked_at IS NULL AND t.expires_at > $1)
          AND (EXISTS (SELECT 1 FROM app_job_tokens t WHERE t.kind = 'build' AND t.subject_id = d.id) OR d.created_at < $2)`,
      [now, new Date(now.getTime() - ORPHAN_MS)],
    );
    for (const row of rows) {
      if (!row.had_token && row.status === 'queued') await this.startBuild(row.id);
      else if (await recordBuildFailure(this.deps, row.id, 'The build ended without reporting its result before its deadline', [])) await deleteBlobs(this.deps.db, row.id);
    }
    await failLostRuns(this.deps, ORPHAN_MS);
  }
}

async function invocationScope(deps: AppDeps, id: string): Promise<ProjectScope | undefined> {
  const { rows } = await deps.db.query<{ org_id: string; project_id: string }>(`SELECT org_id, project_id FROM invocations WHERE id = $1`, [id]);
  return rows[0] ? { orgId: rows[0].org_id, projectId: rows[0].project_id } : undefined;
}

const messageOf = (error: unknown) => (error instanceof Error ? error.message : String(error));

const controllers = new WeakMap<AppDeps, KubeAppJobs>();

/** This service's app Job controller (Kubernetes mode with a runner image), made and started once. */
export function kubeAppJobs(deps: AppDeps): KubeAppJobs | undefined {
  const settings = deps.settings.apps;
  if (!settings?.kubernetes) return undefined;
  let controller = controllers.get(deps);
  if (!controller) {
    controller = new KubeAppJobs(deps, settings, settings.kubernetes);
    controllers.set(deps, controller);
    controller.start();
  }
  return controller;
}
