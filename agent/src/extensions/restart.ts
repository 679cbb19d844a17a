import type { Logger } from 'pino';
import type { ExtensionTarget } from '../../../contract/launch-spec.js';
import type { RunningChromium } from '../chromium.js';
import type { ConnectionTracker } from '../connections.js';
import type { CdpCookie } from '../reset.js';

/**
 * A browser's extensions: those of the launch spec, fetched before Chromium starts, and
 * those loaded into it later (POST /extensions), for which Chromium restarts, as Kernel's
 * does. The restart keeps the session: the same user-data dir (Browser.close flushes
 * cookies and storage to it first), the same display, the same agent and so the same CDP
 * URL. Session cookies, which Chromium does not keep on disk, are read before and set
 * again after. Open pages are not reopened, and CDP and BiDi clients are disconnected:
 * their connections named targets of the old process (they reconnect to the same URL).
 * New connections wait out the restart with a 503, as during a reset.
 */

export interface RestartHost {
  chromium(): RunningChromium | undefined;
  connections: ConnectionTracker;
  /** Disconnects CDP and BiDi clients. */
  closeClients(): void;
  /** Starts Chromium as the agent does at start, with the loader's flags as they are now. */
  relaunch(): Promise<RunningChromium>;
  /** The new Chromium is the browser from now on (its exit watched). */
  adopt(chromium: RunningChromium): void;
  /** Chromium could not be started again: the browser is gone. */
  fail(reason: string): void;
  graceMs: number;
  log: Logger;
}

export class ExtensionLoader {
  private dirs: string[] = [];
  private names: string[] = [];
  /** While true, the exit of the Chromium being replaced is not a crash. */
  restarting = false;
  private queue: Promise<unknown> = Promise.resolve();

  constructor(private readonly host: RestartHost) {}

  /** --load-extension for the unpacked folders; nothing for a browser without extensions. */
  flags(): string[] {
    if (this.dirs.length === 0) return [];
    if (this.dirs.some((dir) => dir.includes(','))) throw new Error('an extension folder path holds a comma, which --load-extension cannot take');
    return [`--load-extension=${this.dirs.join(',')}`];
  }

  loadedNames(): string[] {
    return [...this.names];
  }

  async fetchAtStart(targets: ExtensionTarget[] | undefined, options: { workRoot: string; signal: AbortSignal; log: Logger }): Promise<void> {
    if (!targets?.length) return;
    // Loaded only for a browser with extensions (the zip reader and the fetch), as reset.js below.
    const { fetchExtensions } = await import('./unpack.js');
    this.dirs.push(...(await fetchExtensions(targets, options)));
    this.names.push(...targets.map((t) => t.name));
  }

  /** Adds unpacked folders and restarts Chromium with them; one restart at a time. */
  load(dirs: string[], names: string[]): Promise<void> {
    const run = this.queue.then(() => this.restart(dirs, names));
    this.queue = run.catch(() => undefined);
    return run;
  }

  private async restart(dirs: string[], names: string[]): Promise<void> {
    const { host } = this;
    const old = host.chromium();
    if (!old) throw new Error('the browser is not running');
    const started = Date.now();
    const release = host.connections.holdNewConnections();
    this.restarting = true;
    try {
      const { captureCookies } = await import('../reset.js');
      const cookies = await captureCookies(old).catch((error: unknown) => {
        host.log.warn({ err: error }, 'cookies could not be read before the restart: session cookies are lost');
        return undefined;
      });
      host.closeClients();
      await old.close(host.graceMs);
      this.dirs.push(...dirs);
      this.names.push(...names);
      const next = await this.relaunchOrRevert(dirs.length);
      host.adopt(next);
      await restoreCookies(next, cookies, host.log);
      host.log.info({ extensions: this.names, ms: Date.now() - started, chromium_pid: next.pid }, 'chromium restarted with extensions');
    } finally {
      this.restarting = false;
      release();
    }
  }

  /** A Chromium that will not start with the new extensions is started without them, and the load fails. */
  private async relaunchOrRevert(added: number): Promise<RunningChromium> {
    try {
      return await this.host.relaunch();
    } catch (error) {
      this.host.log.error({ err: error }, 'chromium did not start with the new extensions: starting it without them');
      this.dirs.splice(this.dirs.length - added, added);
      this.names.splice(this.names.length - added, added);
      try {
        this.host.adopt(await this.host.relaunch());
      } catch (again) {
        this.host.fail(`chromium could not be restarted: ${(again as Error).message}`);
      }
      throw error;
    }
  }
}

async function restoreCookies(chromium: RunningChromium, cookies: CdpCookie[] | undefined, log: Logger): Promise<void> {
  const session = (cookies ?? []).filter((cookie) => cookie.session);
  if (session.length === 0) return;
  const { restorableCookies } = await import('../reset.js');
  await chromium.cdp.command('Storage.setCookies', { cookies: restorableCookies(session, Date.now()) }).catch((error: unknown) => {
    log.warn({ err: error }, 'session cookies could not be set again after the restart');
  });
}
