import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import type { BrowserLaunchSpec } from '../../operator/src/ports/browser-runtime.js';
import type { CdpBridge } from './cdp-bridge.js';
import { ConnectionTracker } from './connections.js';
import { resolveSystemUser, type SystemUser } from './system-user.js';
import { ChromiumStartError, findChromium, launchChromium, startUrlOf, type RunningChromium } from './chromium.js';
import type { AgentConfig } from './config.js';
import { startDisplay, type XDisplay } from './display.js';
import { killProcessGroup } from './process-group.js';
import type { AgentPhase, LiveSettings } from './server.js';
import { prepareWorkDir, removeWorkDir, type WorkDir } from './work-dir.js';

/** Exit codes the runtime reads: anything but 0 means the browser is Failed. */
export const EXIT = { clean: 0, startFailed: 1, badConfig: 2, chromiumCrashed: 3 } as const;

/** Settings of the spec this slice of the agent does not apply yet, so the log says so. */
function unsupportedSettings(spec: BrowserLaunchSpec): string[] {
  const ignored: string[] = [];
  if (spec.proxy) ignored.push('proxy');
  if (spec.profile) ignored.push('profile');
  if (spec.stealth) ignored.push('stealth');
  if (spec.kioskMode && spec.headless) ignored.push('kioskMode (headless)');
  if (Object.keys(spec.chromePolicy).length > 0) ignored.push('chromePolicy');
  return ignored;
}

/**
 * One browser's lifetime: serve health at once (503 while starting), launch Chromium,
 * serve CDP, and on shutdown or crash leave no process and no file behind.
 */
export class BrowserAgent {
  private phase: AgentPhase = 'starting';
  private chromium?: RunningChromium;
  private dirs?: WorkDir;
  private display?: XDisplay;
  private bridge?: CdpBridge;
  private server?: Server;
  private stopping?: Promise<void>;
  private starting?: Promise<void>;
  private readonly startAborted = new AbortController();
  private readonly connections = new ConnectionTracker();

  constructor(
    private readonly config: AgentConfig,
    private readonly log: Logger,
    private readonly exit: (code: number) => void,
  ) {}

  start(): Promise<void> {
    this.starting ??= this.startOnce();
    return this.starting;
  }

  private async startOnce(): Promise<void> {
    const started = Date.now();
    const { spec } = this.config;
    if (spec.startUrl && startUrlOf(spec) !== spec.startUrl) this.log.warn({ start_url: spec.startUrl }, 'start URL is not an http(s) URL: opening about:blank');
    const ignored = unsupportedSettings(spec);
    if (ignored.length > 0) this.log.warn({ settings: ignored }, 'launch settings not supported by this agent yet: ignored');
    const user = await this.chromiumUser();
    this.dirs = await prepareWorkDir(this.config.workDir, user);
    // Chromium takes 200-400 ms to answer CDP; the HTTP side loads and listens meanwhile,
    // which keeps ws and the server (about 60 ms of module loading) off the launch path.
    const launched = this.startDisplay(user).then(() => this.launch(user, { sandbox: true }));
    const listening = this.listen();
    await Promise.all([listening, launched.catch(() => undefined)]);
    await listening;
    const chromium = await launched;
    this.chromium = chromium;
    if (this.stopping) return;
    this.phase = 'ready';
    this.log.info({ ms: Date.now() - started, chromium_pid: chromium.pid, sandbox: chromium.sandbox }, 'browser ready');
    void chromium.exited.then((exit) => this.onChromiumExit(exit));
  }

  /** Idempotent: the first reason wins, later calls wait for the same shutdown. */
  shutdown(reason: string, graceMs = this.config.shutdownGraceMs): Promise<void> {
    this.stopping ??= this.stop(reason, graceMs);
    return this.stopping;
  }

  /** For start-up failures: whatever was created is removed before the agent exits non-zero. */
  async abort(error: unknown): Promise<void> {
    // A start cut short by a shutdown is not a failure: the shutdown finishes the job.
    if (this.stopping) return;
    this.log.error({ err: error, stderr_tail: error instanceof ChromiumStartError ? error.stderrTail : undefined }, 'browser failed to start');
    this.phase = 'stopping';
    if (this.chromium) await killProcessGroup(this.chromium.pid);
    await this.display?.stop();
    if (this.dirs) await removeWorkDir(this.dirs);
    this.server?.close();
    this.finish(EXIT.startFailed, 'start-up failed');
  }

  private async listen(): Promise<void> {
    const [{ CdpBridge }, { createAgentServer }] = await Promise.all([import('./cdp-bridge.js'), import('./server.js')]);
    const bridge = new CdpBridge(() => this.chromium?.browserWsUrl, this.connections, this.log);
    const server = createAgentServer(
      {
        browserId: this.config.spec.browserId,
        phase: () => this.phase,
        chromium: () => this.chromium,
        bridge,
        connections: this.connections,
        applySettings: (settings) => this.applySettings(settings),
        requestShutdown: (reason, graceMs) => void this.shutdown(reason, graceMs),
      },
      this.log,
    );
    this.bridge = bridge;
    this.server = server;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.config.port, this.config.host, () => resolve());
    });
    const { address, port } = server.address() as AddressInfo;
    this.log.info({ host: address, port }, 'listening');
  }

  /**
   * Settings changed on the running browser (PATCH /browsers/{id}): each is applied by
   * the module that owns it; the first failure is reported and later ones are not tried.
   */
  private applySettings(settings: LiveSettings): Promise<void> {
    const unsupported: string[] = [];
    if (settings.proxy !== undefined) unsupported.push('proxy');
    if (settings.viewport !== undefined) unsupported.push('viewport');
    if (unsupported.length > 0) return Promise.reject(new Error(`this agent cannot change ${unsupported.join(' and ')} on a running browser yet`));
    return Promise.resolve();
  }

  /** Headful browsers get their own Xvfb at the viewport size before Chromium starts. */
  private async startDisplay(user: SystemUser | undefined): Promise<void> {
    const { spec } = this.config;
    if (spec.headless) return;
    this.display = await startDisplay({ ...spec.viewport, dir: this.dirs!.home, user, timeoutMs: this.config.startTimeoutMs, log: this.log });
  }

  private async chromiumUser(): Promise<SystemUser | undefined> {
    try {
      return await resolveSystemUser(this.config.chromiumUser);
    } catch (error) {
      this.log.error({ err: error, user: this.config.chromiumUser }, 'SANDBOX OFF: cannot find or create the unprivileged user; Chromium runs as root with --no-sandbox');
      return undefined;
    }
  }

  /** As root without an unprivileged user the sandbox cannot work; elsewhere it is tried first. */
  private async launch(user: SystemUser | undefined, options: { sandbox: boolean }): Promise<RunningChromium> {
    const sandbox = options.sandbox && !(process.getuid?.() === 0 && !user);
    const launchOptions = {
      executable: findChromium(this.config.chromePath),
      spec: this.config.spec,
      dirs: this.dirs!,
      display: this.display,
      user,
      startTimeoutMs: this.config.startTimeoutMs,
      signal: this.startAborted.signal,
      log: this.log,
    };
    try {
      return await launchChromium({ ...launchOptions, sandbox });
    } catch (error) {
      if (!sandbox || !(error instanceof ChromiumStartError) || !/sandbox/i.test(error.stderrTail)) throw error;
      this.log.error({ stderr_tail: error.stderrTail }, 'SANDBOX OFF: this host does not allow the Chromium sandbox; relaunching with --no-sandbox');
      return launchChromium({ ...launchOptions, sandbox: false });
    }
  }

  private async onChromiumExit(exit: { code: number | null; signal: NodeJS.Signals | null }): Promise<void> {
    if (this.stopping) return;
    this.phase = 'stopping';
    this.stopping = Promise.resolve();
    this.log.error({ exit_code: exit.code, signal: exit.signal }, `chromium exited unexpectedly (code ${exit.code}, signal ${exit.signal})`);
    this.bridge?.closeAll();
    await killProcessGroup(this.chromium!.pid);
    await this.display?.stop();
    await removeWorkDir(this.dirs!);
    this.server?.close();
    this.finish(EXIT.chromiumCrashed, `chromium exited unexpectedly (code ${exit.code}, signal ${exit.signal})`);
  }

  private async stop(reason: string, graceMs: number): Promise<void> {
    this.log.info({ reason, grace_ms: graceMs }, 'shutting down');
    this.phase = 'stopping';
    this.bridge?.closeAll();
    // A shutdown during start-up cuts Chromium's start short and waits for the start to
    // unwind, so nothing it created is missed.
    this.startAborted.abort();
    await this.starting?.catch(() => undefined);
    try {
      if (this.chromium) await this.chromium.close(graceMs);
    } finally {
      await this.display?.stop();
      if (this.dirs) await removeWorkDir(this.dirs);
      this.server?.close();
      this.server?.closeAllConnections();
    }
    this.finish(EXIT.clean, reason);
  }

  private finish(code: number, reason: string): void {
    this.log.info({ exit_code: code, reason }, 'agent exiting');
    this.exit(code);
  }
}
