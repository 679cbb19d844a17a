/**
 * The BrowserRuntime port: how a reconciler gets a browser (one agent + one Chromium)
 * and gets rid of it. Two adapters fill it:
 *
 * - local (embedded mode): the agent as a child process of the service, launching
 *   Debian's Chromium as an unprivileged user.
 * - kubernetes: one pod per browser (agent + Chromium), non-root, sandboxed.
 *
 * The same agent code runs in both; the runtime only places it and reports on it.
 * Every method is idempotent on `browserId`, because reconcilers retry.
 */

import type { BrowserLaunchSpec, LiveBrowserSettings } from './launch-spec.js';

// The launch spec and the live settings are zod schemas (launch-spec.ts); their types are
// here too, beside the port that takes them.
export type { BrowserLaunchSpec, LiveBrowserSettings, ProxySpec, Viewport } from './launch-spec.js';

export type BrowserPhase = 'Pending' | 'Starting' | 'Ready' | 'Terminating' | 'Failed' | 'Gone';

/** What the runtime sees of a browser right now. */
export interface ObservedBrowser {
  browserId: string;
  phase: BrowserPhase;
  /** Base URL of the agent (CDP pass-through, fs, computer, screencast, health). */
  agentUrl?: string;
  startedAt?: Date;
  /** Why the browser is Failed or Gone (exit code, OOM, eviction), for status messages. */
  reason?: string;
  labels: Record<string, string>;
}

export interface LaunchOptions {
  signal: AbortSignal;
  /**
   * Called at most once, before the launch resolves, when Chromium's process has been
   * started and its agent takes requests at `agentUrl` (requests and connections made
   * before Chromium answers wait for it there, and fail as the launch does). Lets a
   * caller answer while Chromium starts. A runtime that cannot tell (a pod whose agent is
   * not reachable before it is ready) never calls it.
   */
  onStarted?: (started: { agentUrl: string }) => void;
}

export interface BrowserRuntime {
  /** Starts the browser if it does not exist yet; resolves once it is Ready or Failed. */
  launch(spec: BrowserLaunchSpec, options: LaunchOptions): Promise<ObservedBrowser>;
  observe(browserId: string): Promise<ObservedBrowser | undefined>;
  /** Every browser this runtime placed, for reconcilers to find orphans and crashes. */
  list(): Promise<ObservedBrowser[]>;
  /**
   * Changes settings of a Ready browser in place. Rejects with
   * BrowserSettingsError when the agent cannot apply them (the browser keeps what it had).
   */
  applySettings(browserId: string, settings: LiveBrowserSettings): Promise<void>;
  /**
   * Closes the browser cleanly (CDP Browser.close, so Chromium leaves no temp dirs), then
   * kills what is left after `graceMs`; succeeds if it is already gone. With
   * `discardProfile`, a browser launched with `profile.saveChanges` does not save it back
   * (a login flow that failed must not overwrite a good profile with a half-done one).
   */
  terminate(browserId: string, options: { graceMs: number; discardProfile?: boolean }): Promise<void>;
  /**
   * Makes a Ready browser fit for its next holder (a pool release with reuse), in this
   * order: every client connection (CDP, WebDriver BiDi, live view) is closed, and new
   * ones are refused until the reset ends; every browser context but the default one is
   * disposed, and every page but one new about:blank page is closed; the HTTP cache is
   * cleared, permissions and download behaviour go back to the defaults, cookies are
   * cleared and those the browser had at start (its profile's, captured before any
   * client connected) are put back, and the web storage (localStorage, IndexedDB,
   * service workers, Cache Storage) of every origin that had a page or frame open at
   * reset time is cleared; last, `startUrl` (if given) opens in a new page that replaces
   * the blank one (its load is not awaited, as at launch).
   *
   * Not covered: web storage of origins visited earlier but not open at reset time,
   * history, HSTS and open keep-alive sockets. Bounded by a 10 s timeout and `signal`.
   * Rejects with BrowserResetError when the browser cannot be reset (not Ready, a step
   * failed, no answer in time): its state is then unknown, so the caller destroys it.
   */
  reset(browserId: string, options: { startUrl?: string; signal?: AbortSignal }): Promise<BrowserResetReport>;
}

/** What a reset did, for the log. */
export interface BrowserResetReport {
  /** Client connections of the previous holder that were closed. */
  closedConnections: number;
  /** Pages open when the reset began, in every context, now closed. */
  closedTargets: number;
  /**
   * Contexts other than the default one found when the reset began, now disposed. Chromium
   * disposes Playwright's itself when its connection closes, so those are often not counted.
   */
  disposedContexts: number;
  /** Cookies put back from the baseline captured at start. */
  cookiesRestored: number;
}

/** The agent refused or failed to apply live settings; the message says why. */
export class BrowserSettingsError extends Error {}

/** The browser could not be reset (see BrowserRuntime.reset); the message says why. */
export class BrowserResetError extends Error {}
