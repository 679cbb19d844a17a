import { readFile, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readReportedPort, spawnAgent } from '../../api/src/runtime/agent-process.js';
import { fetchHealth } from '../../contract/agent-client.js';
import { signalProcessGroup } from '../../lib/process-group.js';
import { eventually } from '../support/eventually.js';

/**
 * An agent as the embedded runtime starts it runs without a JIT (AGENT_NODE_FLAGS): V8
 * then maps no executable memory of its own, which is what --jitless saves (code space
 * and the compilers' output) on every idle agent. bench/memory.ts measures the rest.
 */

const agentEntry = path.resolve(import.meta.dirname, '../../dist/agent/src/main.js');
let scratch: string;

beforeAll(async () => {
  scratch = await mkdtemp(path.join(os.tmpdir(), 'bp-agent-memory-'));
});

afterAll(async () => {
  await rm(scratch, { recursive: true, force: true });
});

describe('agent memory', () => {
  it('maps no anonymous executable memory: V8 runs the agent without a JIT', async () => {
    const token = randomBytes(32).toString('base64url');
    const portFile = path.join(scratch, 'standby.port');
    const logFile = path.join(scratch, 'standby.log');
    const child = await spawnAgent({ agentEntry, port: 0, portFile, logFile, logLevel: 'warn', standbyToken: token });
    const exited = new Promise((resolve) => child.once('exit', resolve));
    try {
      await eventually(
        async () => {
          const port = await readReportedPort(portFile);
          return port !== undefined && (await fetchHealth({ url: `http://127.0.0.1:${port}`, token }, 500))?.status === 'standby';
        },
        { timeoutMs: 15_000, intervalMs: 50, what: 'the standby agent to answer', detail: () => readFile(logFile, 'utf8').catch(() => '') },
      );
      // Every module of the launch path is loaded by now (standby.ts), and the agent has
      // answered HTTP: the JIT, had it one, would have compiled code.
      const maps = (await readFile(`/proc/${child.pid}/maps`, 'utf8')).split('\n');
      const anonymousExecutable = maps.filter((line) => {
        const [, perms, , , inode, name] = line.trim().split(/\s+/);
        return perms?.includes('x') && inode === '0' && !name;
      });
      expect(anonymousExecutable).toEqual([]);
    } finally {
      signalProcessGroup(child.pid!, 'SIGTERM');
      await exited;
    }
  });
});
