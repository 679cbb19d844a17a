import type { ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { rm } from 'node:fs/promises';
import type { Logger } from 'pino';
import { isProcessAlive, processGroupMembers, signalProcessGroup, waitForProcessGroupExit } from '../../../lib/process-group.js';
import type { ObservedBrowser } from '../../../contract/browser-runtime.js';
import { fetchHealth, requestAgentShutdown, type AgentEndpoint } from '../../../contract/agent-client.js';
import { agentGroupsStartedFor, describeExit, isProcessOf, lastAgentWords, processGroupsMentioning, type AgentExit } from './agent-process.js';
import type { BrowserRecord } from './browser-records.js';

/**
 * One browser of the local runtime (local-runtime.ts) as the runtime tracks it: what it
 * observes of it, recovering one a previous service left behind, and ending its processes.
 */

export interface Tracked {
  record: BrowserRecord;
  child?: ChildProcess;
  exit?: AgentExit;
  terminating?: Promise<void>;
  /** Why the runtime gave up on it (launch timeout, found dead after a restart). */
  failure?: string;
  adoptedDead?: boolean;
  /** Spawned, not yet ready. */
  starting?: boolean;
  /** Where a spawned agent reports its port, until it has. */
  portFile?: string;
}

/**
 * Chromium's singleton socket lives under the work dir and a Unix socket path is limited
 * to 107 bytes, so long ids get a short stable name instead of themselves.
 */
export function workDirName(browserId: string): string {
  return browserId.length <= 24 ? browserId : createHash('sha256').update(browserId).digest('hex').slice(0, 16);
}

export function observedOf(entry: Tracked, phase: ObservedBrowser['phase'], reason?: string): ObservedBrowser {
  return {
    browserId: entry.record.browserId,
    phase,
    ...(phase === 'Ready' ? { agentUrl: entry.record.agentUrl } : {}),
    startedAt: new Date(entry.record.startedAt),
    ...(reason ? { reason } : {}),
    labels: entry.record.labels,
  };
}

export async function failureReason(entry: Tracked): Promise<string> {
  const words = await lastAgentWords(entry.record.logFile);
  const how = entry.exit ? describeExit(entry.exit) : 'agent no longer running';
  return [entry.failure, how, words].filter(Boolean).join(': ');
}

/** The browser's phase now; an agent found gone is marked exited. */
export async function phaseOf(entry: Tracked): Promise<ObservedBrowser> {
  if (entry.terminating) return observedOf(entry, 'Terminating');
  if (entry.starting) return observedOf(entry, 'Starting');
  if (!entry.exit && !entry.child && !(await isProcessOf(entry.record.agentPid, entry.record.agentEntry))) {
    entry.exit = { code: null, signal: null };
  }
  if (!entry.exit) return observedOf(entry, 'Ready');
  const reason = await failureReason(entry);
  const gone = entry.adoptedDead || (entry.exit.code === 0 && !entry.failure);
  return observedOf(entry, gone ? 'Gone' : 'Failed', reason);
}

/**
 * A record on disk that no entry in memory stands for (the service restarted): the agent
 * is adopted if it still runs and serves this browser, else it is tracked as dead (Gone).
 */
export async function recoverRecorded(record: BrowserRecord, agent: AgentEndpoint, log: Logger): Promise<Tracked> {
  const entry: Tracked = { record };
  // A browser still starting when the service stopped (creates are answered at Chromium's
  // spawn) is given the rest of its start before it is judged.
  const health = (await isProcessOf(record.agentPid, record.agentEntry)) ? await fetchHealth(agent, 2000, { waitMs: 5000 }) : undefined;
  if (health?.browser_id === record.browserId && health.status === 'ready') {
    log.info({ browser_id: record.browserId, agent_pid: record.agentPid }, 're-adopted a running browser');
  } else {
    entry.failure = 'agent not running after a service restart';
    entry.exit = { code: null, signal: null };
    entry.adoptedDead = true;
  }
  return entry;
}

/** Clean close through the agent, then SIGKILL of both process groups, then the work dir. */
export async function endBrowserProcesses(entry: Tracked, agent: AgentEndpoint, graceMs: number, saveProfile: boolean): Promise<void> {
  const { record } = entry;
  const agentAlive = () => !entry.exit && isProcessAlive(record.agentPid);
  if (agentAlive() && (await isProcessOf(record.agentPid, record.agentEntry))) {
    // The agent gets most of the grace for Chromium and keeps a little to clean up.
    const asked = await requestAgentShutdown(agent, Math.floor(graceMs * 0.8), { saveProfile });
    if (!asked) signalProcessGroup(record.agentPid, 'SIGTERM');
    const deadline = Date.now() + graceMs;
    while (agentAlive() && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
  }
  if (record.agentPid && (await processGroupMembers(record.agentPid)).length > 0) signalProcessGroup(record.agentPid, 'SIGKILL');
  // Chromium has its own group, and its pid is unknown if the agent died before ready;
  // an agent spawned just before a kill of the service has no pid on record yet.
  const browserGroups = [...new Set([...(await processGroupsMentioning(record.workDir)), ...(await agentGroupsStartedFor(record.workDir, record.agentEntry))])];
  for (const pgid of browserGroups) signalProcessGroup(pgid, 'SIGKILL');
  await Promise.all([record.agentPid, ...browserGroups].filter((pid) => pid > 0).map((pid) => waitForProcessGroupExit(pid, 5000)));
  await rm(record.workDir, { recursive: true, force: true, maxRetries: 3, retryDelay: 50 });
}
