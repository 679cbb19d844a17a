import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import type { BrowserResetReport, LiveBrowserSettings } from '../../contract/browser-runtime.js';
import type { CdpBridge } from './cdp-bridge.js';
import type { RunningChromium } from './chromium.js';
import type { ConnectionTracker } from './connections.js';

/**
 * What the agent's routes see of the running agent: the server (server.ts) and the
 * handlers it loads on first use (bidi, live view, fs, reset) take it, and the agent
 * (agent.ts) fills it. In a module of its own so the handlers need not import the server
 * that imports them.
 */

export const CDP_PATH = '/cdp';
export const WEBDRIVER_PATH = '/webdriver';
export const VNC_PATH = '/vnc';

export type AgentPhase = 'starting' | 'ready' | 'stopping';

/** POST /reset's options, checked (reset.ts). */
export interface ResetRequest {
  /** http(s) or about:blank; absent means about:blank. */
  startUrl?: string;
}

export interface AgentState {
  browserId: string;
  /** The secret every request presents (AGENT_TOKEN, or the standby's claim). */
  token: string;
  phase: () => AgentPhase;
  /** Chromium's process has been started (it may still be starting). */
  spawned: () => boolean;
  chromium: () => RunningChromium | undefined;
  bridge: CdpBridge;
  connections: ConnectionTracker;
  /** Someone (the service's reaper, the runtime) asked for /health: the service is alive. */
  healthPolled: () => void;
  /** Applies settings changed on the running browser; rejects with a message a person can read. */
  applySettings: (settings: LiveBrowserSettings) => Promise<void>;
  /** Makes the browser fit for its next holder (POST /reset, see reset.ts); rejects with why it could not. */
  reset: (request: ResetRequest) => Promise<BrowserResetReport>;
  /** POST /extensions (extensions/http.ts): where they are unpacked, which are loaded, and the restart that loads more. */
  extensions?: { workRoot: () => string; loadedNames: () => string[]; load: (dirs: string[], names: string[]) => Promise<void> };
  /** Starts the shutdown; `graceMs` overrides the configured grace period for Chromium. */
  requestShutdown: (reason: string, graceMs?: number, options?: { saveProfile: boolean }) => void;
}

export type UpgradeHandler = (state: AgentState, request: IncomingMessage, socket: Duplex, head: Buffer, log: Logger) => void;
