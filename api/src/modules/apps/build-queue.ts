import { rm } from 'node:fs/promises';
import type { Logger } from 'pino';
import type { AppDeps } from '../../app-deps.js';
import { inTransaction } from '../../db/pool.js';
import { newId } from '../../ids.js';
import { deleteAppVersions, findLiveAppVersion, insertAppVersion } from './apps-store.js';
import { buildDeployment, BuildError, type InspectApps } from './build.js';
import { APP_REGION, redactEnvVars } from './deployments-schema.js';
import { recordDeploymentEvents, stateFrame } from './deployment-events.js';
import { claimQueuedDeployment, findDeploymentById, interruptedDeployments, setDeploymentStatus, type DeploymentRow } from './deployments-store.js';
import { buildDirOf, type AppsSettings } from './settings.js';

/** Log lines a failed build's status_reason ends with. */
const REASON_TAIL_LINES = 25;
const REASON_MAX_CHARS = 4000;
const LOG_FLUSH_MS = 200;
/** A queued deployment another process created is found by this poll at the latest. */
const POLL_MS = 5000;

export const INTERRUPTED_REASON = 'The service restarted while this deployment was building; deploy it again';
export const DELETED_REASON = 'Deleted with DELETE /deployments/{id}';

/**
 * Builds queued deployments one at a time, oldest first (a build is CPU- and
 * network-heavy; one at a time keeps it off the browsers' cores). At start, builds a
 * previous process left in_progress are failed (their half-made build dir is not worth
 * trusting) and queued ones are built: their source is already in the store. A git
 * deployment's token lives only in this process's memory, so after a restart its fetch
 * runs without one.
 */
export class BuildQueue {
  private running: { id: string; abort: AbortController } | undefined;
  private wakeUp: (() => void) | undefined;
  /** A deployment was queued since the last claim: claim again before sleeping. */
  private woken = false;
  private stopped = false;
  private loop: Promise<void> | undefined;
  private readonly tokens = new Map<string, string>();

  constructor(
    private readonly deps: AppDeps,
    private readonly settings: AppsSettings,
    private readonly inspectApps: InspectApps,
  ) {}

  start(): void {
    this.loop ??= this.run().catch((error: unknown) => this.deps.log.error({ err: error }, 'the deployment build queue stopped'));
    this.deps.shutdown.addEventListener('abort', () => void this.stop(), { once: true });
  }

  /** A new deployment is queued (its git token, if any, kept for its build). */
  enqueued(id: string, gitToken?: string): void {
    if (gitToken) this.tokens.set(id, gitToken);
    this.woken = true;
    this.wakeUp?.();
  }

  /** Stops the build of `id` if it is the one running (a delete). */
  abort(id: string): void {
    this.tokens.delete(id);
    if (this.running?.id === id) this.running.abort.abort(new BuildError(DELETED_REASON));
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.running?.abort.abort(new BuildError('The service is shutting down'));
    this.wakeUp?.();
    await this.loop;
  }

  private async run(): Promise<void> {
    const interrupted = await interruptedDeployments(this.deps.db).catch((error: unknown) => {
      this.deps.log.error({ err: error }, 'reading the builds a previous process left failed');
      return [];
    });
    for (const row of interrupted) await this.finishFailed(row.id, INTERRUPTED_REASON, []);
    while (!this.stopped) {
      this.woken = false;
      const row = await claimQueuedDeployment(this.deps.db, this.deps.clock.now()).catch((error: unknown) => {
        this.deps.log.error({ err: error }, 'claiming a queued deployment failed');
        return undefined;
      });
      if (row) {
        await this.build(row);
        continue;
      }
      if (this.woken) continue;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, POLL_MS);
        this.wakeUp = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      this.wakeUp = undefined;
    }
  }

  private async build(row: DeploymentRow): Promise<void> {
    const abort = new AbortController();
    this.running = { id: row.id, abort };
    const tail: string[] = [];
    let pending: { at: Date; event: object }[] = [];
    const flush = async () => {
      const frames = pending;
      pending = [];
      await recordDeploymentEvents(this.deps, this.deps.db, row.id, frames).catch((error: unknown) =>
        this.deps.log.warn({ err: error, deploymentId: row.id }, 'recording build log lines failed'),
      );
    };
    const timer = setInterval(() => void flush(), LOG_FLUSH_MS);
    const log = (line: string) => {
      // npm's blank separator lines say nothing in a log view.
      if (line.trim() === '') return;
      const at = this.deps.clock.now();
      tail.push(line);
      if (tail.length > REASON_TAIL_LINES) tail.shift();
      pending.push({ at, event: { event: 'log', message: line, timestamp: at.toISOString() } });
    };
    try {
      await this.stateChanged(row);
      const output = await buildDeployment(row, { settings: this.settings, inspectApps: this.inspectApps, gitToken: this.tokens.get(row.id), signal: abort.signal, log });
      clearInterval(timer);
      await flush();
      await this.finishRunning(row, output);
    } catch (error) {
      clearInterval(timer);
      await flush();
      const reason = abort.signal.aborted ? (abort.signal.reason as Error).message : error instanceof BuildError ? error.message : 'the build failed unexpectedly';
      if (!(error instanceof BuildError) && !abort.signal.aborted) this.deps.log.error({ err: error, deploymentId: row.id }, 'a deployment build failed unexpectedly');
      await this.finishFailed(row.id, reason, tail);
      // Also when a delete stopped it (finishFailed then changes nothing): the build is over.
      await removeBuildDir(this.settings.dataDir, row.id, this.deps.log);
    } finally {
      clearInterval(timer);
      this.tokens.delete(row.id);
      this.running = undefined;
    }
  }

  private async stateChanged(row: DeploymentRow): Promise<void> {
    await recordDeploymentEvents(this.deps, this.deps.db, row.id, [stateFrame(row, this.deps.clock.now())]);
  }

  /** Records the apps and marks the deployment running, or fails it when an (app, version) is taken and force is off. */
  private async finishRunning(row: DeploymentRow, output: Awaited<ReturnType<typeof buildDeployment>>): Promise<void> {
    const conflict = await inTransaction(this.deps.db, async (tx) => {
      const now = this.deps.clock.now();
      const current = await findDeploymentById(tx, row.id);
      // Deleted while it built: the delete recorded its own state.
      if (current?.status !== 'in_progress') return undefined;
      const scope = { orgId: row.org_id, projectId: row.project_id };
      const frames: { at: Date; event: object }[] = [];
      for (const app of output.apps) {
        const live = await findLiveAppVersion(tx, row.project_id, app.name, row.version);
        if (live && !row.force) {
          return `app ${JSON.stringify(app.name)} version ${JSON.stringify(row.version)} already exists (deployment ${live.deployment_id}); deploy with force to replace it, or use another version`;
        }
        if (live) await deleteAppVersions(tx, { id: live.id }, now);
        const version = await insertAppVersion(tx, scope, {
          id: newId('app'),
          deployment_id: row.id,
          app_name: app.name,
          version: row.version,
          runtime: output.runtime,
          entry: output.entry,
          actions: app.actions.map((action) => ({ name: action.name })),
          env_vars: row.env_vars,
          created_at: now,
        });
        const summary = { event: 'app_version_summary', id: version.id, app_name: app.name, version: row.version, actions: version.actions, env_vars: redactEnvVars(row.env_vars), region: APP_REGION };
        frames.push({ at: now, event: { ...summary, timestamp: now.toISOString() } });
      }
      const done = await setDeploymentStatus(tx, row.id, { status: 'running', from: ['in_progress'], statusReason: null, ...(output.checksum ? { checksum: output.checksum } : {}), now });
      frames.push(stateFrame(done!, now));
      await recordDeploymentEvents(this.deps, tx, row.id, frames);
      return undefined;
    });
    if (conflict) await this.finishFailed(row.id, conflict, []);
  }

  private async finishFailed(id: string, reason: string, tail: string[]): Promise<void> {
    const withTail = tail.length ? `${reason}\n--- last build output\n${tail.join('\n')}` : reason;
    const statusReason = withTail.length > REASON_MAX_CHARS ? `${withTail.slice(0, 200)}\n[...]\n${withTail.slice(-(REASON_MAX_CHARS - 210))}` : withTail;
    const failed = await inTransaction(this.deps.db, async (tx) => {
      const now = this.deps.clock.now();
      const row = await setDeploymentStatus(tx, id, { status: 'failed', from: ['queued', 'in_progress'], statusReason, now });
      if (row) await recordDeploymentEvents(this.deps, tx, id, [stateFrame(row, now)]);
      return row !== undefined;
    }).catch((error: unknown) => {
      this.deps.log.error({ err: error, deploymentId: id }, 'marking a deployment failed did not work');
      return false;
    });
    // Nothing runs from a failed build: its dir (node_modules and all) only takes disk.
    if (failed) await removeBuildDir(this.settings.dataDir, id, this.deps.log);
  }
}

/** Removes a deployment's build dir (a failed or deleted deployment's), logging a failure. */
export async function removeBuildDir(dataDir: string, deploymentId: string, log: Logger): Promise<void> {
  await rm(buildDirOf(dataDir, deploymentId), { recursive: true, force: true }).catch((error: unknown) =>
    log.warn({ err: error, deploymentId }, 'removing a build dir failed'),
  );
}
