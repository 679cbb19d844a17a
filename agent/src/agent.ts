import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import type { BrowserResetReport, LiveBrowserSettings } from '../../contract/browser-runtime.js';
import type { CdpBridge } from './cdp-bridge.js';
import { closeAllBidiClients } from './bidi/registry.js';
import { ConnectionTracker } from './connections.js';
import type { SystemUser } from '../../lib/system-user.js';
import { chromiumUserOf, launchBrowser, unsupportedSettings } from './browser-launch.js';
import { ChromiumStartError, findChromium, startUrlOf, type RunningChromium } from './chromium.js';
import type { AgentConfig } from './config.js';
import type { XDisplay } from './display.js';
import { killProcessGroup } from '../../lib/process-group.js';
import { preparePolicy, type PolicyLaunch } from './policy.js';
import { reportPort } from '../../lib/port-file.js';
import { ProxyForwarder } from './proxy.js';
import { withoutRoutingPolicies } from '../../contract/egress.js';
import type { AgentPhase, ResetRequest } from './agent-state.js';
import type { CdpCookie } from './reset.js';
import type { ProfileTarget } from './profile.js';
import { endSessionProcesses } from './process/session-end.js';
import { prepareWorkDir, removeWorkDir, type WorkDir } from './work-dir.js';
import { ExtensionLoader } from './extensions/restart.js';
import { watchForOrphaning } from './orphan-watch.js';

/** How long after ready the proxy forwarder loads proxy-chain unless Chromium needs it sooner (see startOnce). */
const PROXY_LOAD_DELAY_MS = 1000;

/** Exit codes the runtime reads: anything but 0 means the browser is Failed. */
export const EXIT = { clean: 0, startFailed: 1, badConfig: 2, chromiumCrashed: 3 } as const;

/**
 * One browser's lifetime: serve health at once (503 while starting), launch Chromium,
 * serve CDP, and on shutdown or crash leave no process and no file behind.
 */
export class BrowserAgent {
  private phase: AgentPhase = 'starting';
  private chromium?: RunningChromium;
  private dirs?: WorkDir;
  private display?: XDisplay;
  private forwarder?: ProxyForwarder;
  private policy?: PolicyLaunch;
  private extraFlags: string[] = [];
  private bridge?: CdpBridge;
  private server?: Server;
  private stopping?: Promise<void>;
  /** Set by a shutdown that asks not to write the profile back (a failed login flow). */
  private profileDiscarded = false;
  /** A profile attached while the browser runs (PATCH), which it saves into at the end. */
  private attachedProfile?: ProfileTarget;
  private starting?: Promise<void>;
  private readonly startAborted = new AbortController();
  private readonly connections = new ConnectionTracker();
  private lastHealthPoll = Date.now();
  /** The cookies a reset puts back (see reset.ts); undefined when they could not be read. */
  private cookieBaseline: Promise<CdpCookie[] | undefined> = Promise.resolve(undefined);
  /** Resets run one after the other. */
  private resetting: Promise<unknown> = Promise.resolve();
  private orphanTimer?: NodeJS.Timeout;
  /** Called once the phase leaves 'starting' (ready, failed or stopping): a waiting GET /health answers then. */
  private settle!: () => void;
  private readonly settled = new Promise<void>((resolve) => (this.settle = resolve));
  private spawnedAt = 0; // when Chromium was spawned (0: not yet): the service may answer its caller then
  private markSpawned!: () => void;
  private readonly spawnedOrSettled = Promise.race([new Promise<void>((resolve) => (this.markSpawned = resolve)), this.settled]);
  private user?: SystemUser;
  private readonly extensions: ExtensionLoader;

  constructor(
    private readonly config: AgentConfig,
    private readonly log: Logger,
    private readonly exit: (code: number) => void,
  ) {
    const closeClients = () => (this.bridge?.closeAll(), closeAllBidiClients());
    const [relaunch, adopt, fail] = [() => this.launch(this.user), (c: RunningChromium) => this.adopt(c), (why: string) => void this.shutdown(why)];
    this.extensions = new ExtensionLoader({ chromium: () => this.chromium, connections: this.connections, closeClients, relaunch, adopt, fail, graceMs: config.shutdownGraceMs, log });
  }

  start(): Promise<void> {
    this.starting ??= this.startOnce();
    return this.starting;
  }

  private async startOnce(): Promise<void> {
    const started = Date.now();
    const { spec } = this.config;
    // The service answers its caller at Chromium's spawn: clients connecting earlier wait
    // (not refused) until the start settles and the cookie baseline, if any, is read.
    this.connections.admitAfter(this.settled.then(() => this.cookieBaseline));
    if (spec.startUrl && startUrlOf(spec) !== spec.startUrl) this.log.warn({ start_url: spec.startUrl }, 'start URL is not an http(s) URL: opening about:blank');
    const ignored = unsupportedSettings(spec);
    if (ignored.length > 0) this.log.warn({ settings: ignored }, 'launch settings not supported by this agent yet: ignored');
    // Binds its port at once; proxy-chain loads in the background (see proxy.ts).
    const chromiumUser = chromiumUserOf(this.config, this.log);
    // The forwarder serves Chromium's user alone: as root, the browser user; else our own uid.
    const peerUid = chromiumUser.then((user) => user?.uid ?? process.getuid?.(), () => undefined);
    const forwarding = ProxyForwarder.start(spec.proxy, this.log, this.config.egress, peerUid).then((forwarder) => (this.forwarder = forwarder));
    forwarding.catch(() => undefined);
    const user = (this.user = await chromiumUser);
    this.dirs = await prepareWorkDir(this.config.workDir, user);
    const workDirReady = Date.now();
    // Chromium takes 200-400 ms to answer CDP; the HTTP side loads and listens meanwhile,
    // which keeps ws and the server (about 60 ms of module loading) off the launch path.
    const extensions = this.extensions.fetchAtStart(spec.extensions, { workRoot: this.dirs.root, signal: this.startAborted.signal, log: this.log });
    const launched = Promise.all([this.startDisplay(user), this.prepareLaunchExtras(user, forwarding), this.restoreProfile(user), extensions]).then(() =>
      this.launch(user),
    );
    const listening = this.listen();
    await Promise.all([listening, launched.catch(() => undefined)]);
    await listening;
    const chromium = await launched;
    const answeredAt = Date.now();
    // Off the launch path (Chromium answers slowly while it starts: 100-300 ms here), but
    // before any client: clients wait for it, so none has changed a cookie yet.
    this.cookieBaseline = this.captureCookieBaseline(chromium);
    this.chromium = chromium;
    if (this.stopping) return;
    this.phase = 'ready';
    this.settle();
    const split = { work_dir_ms: workDirReady - started, spawn_ms: this.spawnedAt - started, chromium_ms: answeredAt - this.spawnedAt };
    this.log.info({ ms: Date.now() - started, ...split, chromium_pid: chromium.pid, sandbox: chromium.sandbox }, 'browser ready');
    // proxy-chain's load (50-500 ms of stalled event loop) would hold up the first client's
    // commands: it loads a moment later, or at Chromium's first use of the forwarder (proxy.ts).
    setTimeout(() => void (this.stopping ? undefined : this.forwarder?.load()), PROXY_LOAD_DELAY_MS).unref();
    this.adopt(chromium);
    this.lastHealthPoll = Date.now();
    const shutdown = (why: string) => void this.shutdown(why);
    this.orphanTimer = watchForOrphaning({ timeoutMs: this.config.orphanTimeoutMs, lastHealthPoll: () => this.lastHealthPoll, clients: () => this.connections.total(), shutdown });
    if (spec.telemetry) void import('./telemetry/index.js').then((t) => t.startTelemetry(spec.telemetry, () => this.chromium?.cdp, this.log));
  }

  /** Chromium with this browser's flags; at start and when extensions are loaded (extensions/restart.ts). */
  private launch(user: SystemUser | undefined): Promise<RunningChromium> {
    const onSpawn = () => ((this.spawnedAt ||= Date.now()), this.markSpawned());
    const extraFlags = [...this.extraFlags, ...this.extensions.flags()];
    return launchBrowser({ onSpawn, config: this.config, dirs: this.dirs!, display: this.display, user, extraFlags, binds: this.policy?.binds ?? [], signal: this.startAborted.signal, log: this.log });
  }

  /** The browser from now on; the exit of one being replaced by a restart is not the browser's end. */
  private adopt(chromium: RunningChromium): void {
    // A restart (extensions loaded) replaces the CDP connection telemetry captures from.
    if (this.chromium && this.chromium !== chromium) void import('./telemetry/index.js').then((t) => t.reattachTelemetry());
    this.chromium = chromium;
    void chromium.exited.then((exit) => (chromium === this.chromium && !this.extensions.restarting ? this.onChromiumExit(exit) : undefined));
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
    this.settle();
    if (this.chromium) await killProcessGroup(this.chromium.pid);
    await this.display?.stop();
    await this.releaseLaunchExtras();
    if (this.dirs) await removeWorkDir(this.dirs);
    this.server?.close();
    this.finish(EXIT.startFailed, 'start-up failed');
  }

  private async listen(): Promise<void> {
    const [{ CdpBridge }, { createAgentServer }, { telemetry }] = await Promise.all([import('./cdp-bridge.js'), import('./server.js'), import('./telemetry/sink.js')]);
    telemetry.configure(this.config.spec.telemetry); // before any client: its cdp_connect counts
    const bridge = new CdpBridge(() => this.chromium?.cdp, this.connections, this.log);
    const server = createAgentServer(
      {
        browserId: this.config.spec.browserId,
        token: this.config.token,
        phase: () => this.phase,
        spawned: () => this.spawnedAt > 0,
        chromium: () => this.chromium,
        bridge,
        connections: this.connections,
        applySettings: (settings) => this.applySettings(settings),
        reset: (request) => this.reset(request),
        extensions: { workRoot: () => this.dirs!.root, loadedNames: () => this.extensions.loadedNames(), load: (dirs, names) => this.extensions.load(dirs, names) },
        healthPolled: () => (this.lastHealthPoll = Date.now()),
        requestShutdown: (reason, graceMs, options) => {
          if (options?.saveProfile === false) this.profileDiscarded = true;
          void this.shutdown(reason, graceMs);
        },
      },
      this.log,
      { settled: () => this.settled, spawned: () => this.spawnedOrSettled },
    );
    this.bridge = bridge;
    this.server = server;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.config.port, this.config.host, () => resolve());
    });
    const { address, port } = server.address() as AddressInfo;
    this.log.info({ host: address, port }, 'listening');
    if (this.config.portFile) await reportPort(this.config.portFile, port);
  }

  /**
   * Settings changed on the running browser (PATCH /browsers/{id}): each is applied by
   * the module that owns it; the first failure is reported and later ones are not tried.
   */
  private async applySettings(settings: LiveBrowserSettings): Promise<void> {
    if (settings.profile !== undefined && this.profileTarget()) throw new Error('the browser already has a profile');
    // All or nothing: the proxy is checked (ProxySpecError, a message without credentials)
    // before anything changes; a viewport that cannot be applied undoes itself; only then
    // does the new proxy route take over.
    const route = settings.proxy !== undefined ? this.forwarder!.prepareRoute(settings.proxy) : undefined;
    if (settings.viewport !== undefined) {
      try {
        await this.applyViewport(settings.viewport);
      } catch (error) {
        if (route) this.forwarder!.discardRoute(route);
        throw error;
      }
    }
    if (route) this.forwarder!.useRoute(route);
    if (settings.profile !== undefined) this.attachedProfile = settings.profile;
    if (settings.telemetry !== undefined) await (await import('./telemetry/index.js')).startTelemetry(settings.telemetry, () => this.chromium?.cdp, this.log);
  }

  private async applyViewport(viewport: NonNullable<LiveBrowserSettings['viewport']>): Promise<void> {
    if (!this.chromium) throw new Error('the browser is not running');
    await (await import('./live/viewport.js')).applyViewport(this.chromium, viewport, this.log);
  }

  /**
   * A fresh user-data dir holds no cookies, so only a browser with a profile asks Chromium.
   * Unreadable cookies do not fail the launch: a reset then refuses, and the pool replaces
   * the browser instead of reusing it.
   */
  private async captureCookieBaseline(chromium: RunningChromium): Promise<CdpCookie[] | undefined> {
    if (!this.config.spec.profile) return [];
    try {
      const { captureCookies } = await import('./reset.js');
      return await captureCookies(chromium);
    } catch (error) {
      this.log.error({ err: error }, 'could not read the cookies the profile brought: this browser cannot be reset');
      return undefined;
    }
  }

  /** POST /reset (a pool release): see reset.ts. Refused unless the browser is ready. */
  private reset(request: ResetRequest): Promise<BrowserResetReport> {
    const run = this.resetting.then(async () => {
      if (this.phase !== 'ready' || !this.chromium) {
        this.log.warn({ phase: this.phase }, 'reset refused: the browser is not ready');
        throw new Error(`the browser cannot be reset while it is ${this.phase}`);
      }
      const cookieBaseline = await this.cookieBaseline;
      const { resetBrowser } = await import('./reset.js');
      return resetBrowser({ chromium: this.chromium, connections: this.connections, cookieBaseline, log: this.log }, request);
    });
    this.resetting = run.catch(() => undefined);
    return run;
  }

  /** x11vnc (started by the first live view client) goes before its display; its viewers see the connection close. */
  private async stopLiveView(): Promise<void> {
    if (this.display) await (await import('./live/vnc-server.js')).stopVncServers();
  }

  /** Chromium's flags and bind mounts from the proxy forwarder, stealth and chrome_policy. */
  private async prepareLaunchExtras(user: SystemUser | undefined, forwarding: Promise<ProxyForwarder>): Promise<void> {
    const { spec } = this.config;
    const workDir = this.dirs!.root;
    const chromePolicy = withoutRoutingPolicies(this.config.egress, spec.chromePolicy);
    if (chromePolicy.dropped.length > 0) this.log.warn({ policies: chromePolicy.dropped }, 'chrome_policy entries dropped: they would route around the proxy forwarder');
    const [forwarder, stealthFlags, policy] = await Promise.all([
      forwarding,
      // Loaded only for a stealth browser: its page script is a large string to hold.
      spec.stealth ? import('./stealth.js').then(({ prepareStealth }) => prepareStealth({ workDir, executable: findChromium(this.config.chromePath) })) : [],
      preparePolicy({ policy: chromePolicy.policy, workDir }),
    ]);
    this.policy = policy;
    this.extraFlags = [...forwarder.chromiumFlags(), ...stealthFlags];
  }

  private async releaseLaunchExtras(): Promise<void> {
    await this.forwarder?.close();
    await this.policy?.cleanup();
  }

  private profileTarget(): ProfileTarget | undefined {
    return this.config.spec.profile ?? this.attachedProfile;
  }

  /** The stored profile goes into the fresh user-data dir before Chromium starts; a failure fails the launch. */
  private async restoreProfile(user: SystemUser | undefined): Promise<void> {
    const target = this.config.spec.profile;
    if (!target) return;
    const { restoreProfile } = await import('./profile.js');
    const signal = AbortSignal.any([this.startAborted.signal, AbortSignal.timeout(this.config.startTimeoutMs)]);
    await restoreProfile(target, { userDataDir: this.dirs!.userData, user, signal, log: this.log });
  }

  /**
   * Only after a clean close: a crashed or killed Chromium may leave its files half-written.
   * A failed save is logged with its reason and the shutdown goes on.
   */
  private async saveProfile(deadline: number): Promise<void> {
    const target = this.profileTarget();
    if (!target || !this.chromium || !this.dirs) return;
    const exit = await this.chromium.exited;
    if (exit.code !== 0 || exit.signal !== null) {
      this.log.error({ profile_id: target.id, exit_code: exit.code, signal: exit.signal }, 'profile not saved: chromium did not close cleanly');
      return;
    }
    try {
      const { saveProfile } = await import('./profile.js');
      await saveProfile(target, { userDataDir: this.dirs.userData, signal: AbortSignal.timeout(Math.max(1000, deadline - Date.now())), log: this.log });
    } catch (error) {
      this.log.error({ err: error, profile_id: target.id }, 'profile not saved');
    }
  }

  /** Headful browsers get their own Xvfb at the viewport size before Chromium starts. */
  private async startDisplay(user: SystemUser | undefined): Promise<void> {
    const { spec } = this.config;
    if (spec.headless) return;
    const { startDisplay } = await import('./display.js');
    this.display = await startDisplay({ ...spec.viewport, dir: `${this.dirs!.root}/x11`, user, timeoutMs: this.config.startTimeoutMs, log: this.log });
  }

  private async onChromiumExit(exit: { code: number | null; signal: NodeJS.Signals | null }): Promise<void> {
    if (this.stopping) return;
    this.phase = 'stopping';
    this.stopping = Promise.resolve();
    // Exit 0 without a signal is Chromium honouring Browser.close (from a CDP or BiDi
    // client): the browser ended as asked, so the agent ends cleanly and the session ends
    // as browser_gone. Anything else is a crash, reported as one.
    const closedByClient = exit.code === 0 && exit.signal === null;
    const why = closedByClient ? 'chromium closed by a client (Browser.close)' : `chromium exited unexpectedly (code ${exit.code}, signal ${exit.signal})`;
    if (closedByClient) this.log.info({ exit_code: exit.code }, why);
    else this.log.error({ exit_code: exit.code, signal: exit.signal }, why);
    this.bridge?.closeAll();
    closeAllBidiClients();
    await endSessionProcesses();
    await killProcessGroup(this.chromium!.pid);
    await this.stopLiveView();
    await this.display?.stop();
    await this.releaseLaunchExtras();
    await removeWorkDir(this.dirs!);
    await (await import('./telemetry/index.js')).endTelemetry(closedByClient ? undefined : this.chromium!.pid);
    this.server?.close();
    this.finish(closedByClient ? EXIT.clean : EXIT.chromiumCrashed, why);
  }

  private async stop(reason: string, graceMs: number): Promise<void> {
    clearInterval(this.orphanTimer);
    this.log.info({ reason, grace_ms: graceMs }, 'shutting down');
    this.phase = 'stopping';
    this.settle();
    this.bridge?.closeAll();
    closeAllBidiClients();
    // A shutdown during start-up cuts Chromium's start short and waits for the start to
    // unwind, so nothing it created is missed.
    this.startAborted.abort();
    await this.starting?.catch(() => undefined);
    try {
      // With a profile to save, the time beyond the usual grace is the upload's, not a hung Chromium's.
      const deadline = Date.now() + graceMs;
      const saving = this.profileTarget()?.saveChanges === true && !this.profileDiscarded;
      if (this.chromium) await this.chromium.close(saving ? Math.min(graceMs, this.config.shutdownGraceMs) : graceMs);
      if (saving) await this.saveProfile(deadline);
    } finally {
      await endSessionProcesses();
      await this.stopLiveView();
      await this.display?.stop();
      await this.releaseLaunchExtras();
      if (this.dirs) await removeWorkDir(this.dirs);
      await (await import('./telemetry/index.js')).endTelemetry();
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
