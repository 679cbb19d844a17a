import type { Logger } from 'pino';
import type { AgentTokens } from '../../../contract/agent-client.js';
import type { UidRange } from './uid-pool.js';

/** What the embedded runtime (local-runtime.ts) is made with. */
export interface LocalRuntimeOptions {
  /** Records (<id>.json) and agent logs (<id>.log); may be private to the service. */
  stateDir: string;
  log: Logger;
  /** The agent token of each browser (agent-client.ts): handed to its agent, presented on every call. */
  agentTokens: AgentTokens;
  /** Default: the built agent, dist/agent/src/main.js. */
  agentEntry?: string;
  chromePath?: string;
  /**
   * Parent of the per-browser work dirs. Chromium's unprivileged user must be able to
   * enter it, so it is not under the state dir (which may sit under /root).
   * Default: <tmp>/browserplane-browsers.
   */
  workRoot?: string;
  /** How long an agent gets to report ready. Default 30 s. */
  launchTimeoutMs?: number;
  /**
   * Agents kept started and waiting (standby), so a launch skips Node's start and the
   * agent's module loading (150-200 ms here). Default 1; 0 turns it off.
   */
  standbyAgents?: number;
  agentLogLevel?: string;
  /** Keeps every browser's traffic off loopback and private networks but these (contract/egress.ts). Default: off. */
  egress?: { blockPrivateNetworks: boolean; allowedNetworks?: string | undefined };
  /** The browser file API's limits for every agent (AGENT_FS_*; unset: the agent's defaults). */
  agentFsEnv?: Record<`AGENT_${'FS' | 'LOGS'}_${string}`, string>;
  /**
   * The uids sessions' browsers run as, one each (uid-pool.ts), when the service runs as
   * root. Default: DEFAULT_SESSION_UIDS.
   */
  sessionUids?: UidRange;
  /**
   * Each browser's memory limit, MiB: its agent, Chromium and the session's processes share
   * one memory cgroup (memory-cgroup.ts). 0 turns it off. Default 2048.
   */
  memoryLimitMb?: number;
}
