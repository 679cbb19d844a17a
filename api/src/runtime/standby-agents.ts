import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { rm } from 'node:fs/promises';
import path from 'node:path';
import type { Logger } from 'pino';
import { signalProcessGroup } from '../../../lib/process-group.js';
import type { BrowserLaunchSpec } from '../../../contract/browser-runtime.js';
import { claimStandbyAgent, fetchHealth } from '../../../contract/agent-client.js';
import { readReportedPort, spawnAgent } from './agent-process.js';
import { joinCgroup } from './memory-cgroup.js';
import type { BrowserRecord, BrowserRecords } from './browser-records.js';

/**
 * Agents kept started and waiting (standby, agent/src/standby.ts), so a launch skips
 * Node's start and the agent's module loading (150-200 ms here). The local runtime claims
 * one per launch and starts the next off any launch's path.
 */

export interface Standby {
  child: ChildProcess;
  /** Empty until the agent reported its port. */
  agentUrl: string;
  logFile: string;
  /** The secret its claim carries. */
  token: string;
  /** True once it answers GET /health as a standby. */
  ready: Promise<boolean>;
}

/** What every agent of the runtime is started with, standby or not. */
export interface AgentSpawnSettings {
  agentEntry: string;
  chromePath: string | undefined;
  logLevel: string;
  egress: { blockPrivateNetworks: boolean; allowedNetworks?: string | undefined } | undefined;
  fsEnv: Record<`AGENT_${'FS' | 'LOGS'}_${string}`, string> | undefined;
}

export class StandbyAgents {
  /** Started, not yet claimed. */
  private readonly waiting: Standby[] = [];
  private closed = false;
  private refilling: Promise<void> | undefined;

  constructor(
    private readonly options: {
      stateDir: string;
      records: BrowserRecords;
      /** How many to keep waiting; 0 turns standbys off. */
      wanted: number;
      spawn: AgentSpawnSettings;
      log: Logger;
    },
  ) {}

  /** Starts standby agents up to the wanted number, one after the other, off any launch's path. */
  refill(): Promise<void> {
    const { options } = this;
    this.refilling ??= (async () => {
      while (!this.closed && this.waiting.length < options.wanted) {
        await options.records.ensureDir();
        const name = `standby-${randomBytes(6).toString('hex')}`;
        const logFile = path.join(options.stateDir, `${name}.log`);
        const portFile = path.join(options.stateDir, `${name}.port`);
        const token = randomBytes(32).toString('base64url');
        const child = await spawnAgent({ ...options.spawn, port: 0, portFile, logFile, standbyToken: token });
        const standby: Standby = { child, agentUrl: '', logFile, token, ready: Promise.resolve(false) };
        standby.ready = this.waitForStandby(standby, portFile);
        child.once('exit', () => {
          const index = this.waiting.indexOf(standby);
          if (index >= 0) this.waiting.splice(index, 1);
          void rm(logFile, { force: true });
          void rm(portFile, { force: true });
        });
        this.waiting.push(standby);
        // One at a time, so standbys never compete with each other for the CPU.
        await standby.ready;
        if (this.closed) this.stop(standby);
      }
    })()
      .catch((error: unknown) => options.log.warn({ err: error }, 'could not start a standby agent; launches start their own'))
      .finally(() => (this.refilling = undefined));
    return this.refilling;
  }

  /**
   * A standby agent, claimed for `spec` with the browser's `agentToken`, or undefined (then
   * the launch spawns its own). One still loading is waited for: it is further along than
   * a new one would be. The record names the standby before the claim (see LocalRuntime's
   * start).
   */
  /** With `cgroup`, the standby joins that memory cgroup before it is claimed (memory-cgroup.ts). */
  async claim(spec: BrowserLaunchSpec, record: BrowserRecord, agentToken: string, cgroup: string | undefined): Promise<Standby | undefined> {
    const standby = this.waiting.shift();
    if (!standby) return undefined;
    if (await standby.ready) {
      await this.options.records.write({ ...record, agentPid: standby.child.pid!, agentUrl: standby.agentUrl });
      if (cgroup) await joinCgroup(cgroup, standby.child.pid!);
      if (await claimStandbyAgent({ url: standby.agentUrl, token: standby.token }, agentToken, spec, record.workDir, record.chromiumUid)) return standby;
    }
    this.options.log.warn({ agent_pid: standby.child.pid }, 'a standby agent could not be claimed; starting a new one');
    this.stop(standby);
    return undefined;
  }

  /** Stops every waiting standby and starts no more: they are only of use to this runtime. */
  close(): void {
    this.closed = true;
    for (const standby of [...this.waiting]) this.stop(standby);
  }

  private stop(standby: Standby): void {
    const index = this.waiting.indexOf(standby);
    if (index >= 0) this.waiting.splice(index, 1);
    if (standby.child.pid) signalProcessGroup(standby.child.pid, 'SIGTERM');
  }

  /** Resolves true once the standby reported its port and answers as one; false if it exits or takes more than 10 s. */
  private async waitForStandby(standby: Standby, portFile: string): Promise<boolean> {
    const { child } = standby;
    const deadline = Date.now() + 10_000;
    while (child.exitCode === null && child.signalCode === null && Date.now() < deadline) {
      if (!standby.agentUrl) {
        const port = await readReportedPort(portFile);
        if (port !== undefined) {
          standby.agentUrl = `http://127.0.0.1:${port}`;
          await rm(portFile, { force: true });
        }
      }
      if (standby.agentUrl && (await fetchHealth({ url: standby.agentUrl, token: standby.token }, 500))?.status === 'standby') return true;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    return false;
  }
}
