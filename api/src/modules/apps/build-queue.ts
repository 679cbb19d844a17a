import { rm } from 'node:fs/promises';
import type { Logger } from 'pino';
import type { AppDeps } from '../../app-deps.js';
import { buildDeployment, BuildError, type BuildOutput, type InspectApps } from './build.js';
import { recordBuildFailure, recordBuildSuccess, REASON_TAIL_LINES } from './build-finish.js';
import { recordDeploymentEvents, stateFrame } from './deployment-events.js';
import { claimQueuedDeployment, interruptedDeployments, type DeploymentRow } from './deployments-store.js';
import { buildDirOf, type AppsSettings } from './settings.js';

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

  private async finishRunning(row: DeploymentRow, output: BuildOutput): Promise<void> {
    const failed = await recordBuildSuccess(this.deps, row, output);
    if (failed) await removeBuildDir(this.settings.dataDir, row.id, this.deps.log);
  }

  private async finishFailed(id: string, reason: string, tail: string[]): Promise<void> {
    // Nothing runs from a failed build: its dir (node_modules and all) only takes disk.
    if (await recordBuildFailure(this.deps, id, reason, tail)) await removeBuildDir(this.settings.dataDir, id, this.deps.log);
  }
}

/** Removes a deployment's build dir (a failed or deleted deployment's), logging a failure. */
export async function removeBuildDir(dataDir: string, deploymentId: string, log: Logger): Promise<void> {
  await rm(buildDirOf(dataDir, deploymentId), { recursive: true, force: true }).catch((error: unknown) =>
    log.warn({ err: error, deploymentId }, 'removing a build dir failed'),
  );
}
