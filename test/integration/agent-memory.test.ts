import { spawn } from 'node:child_process';
import { chmod, readFile, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AGENT_NODE_FLAGS, readReportedPort, spawnAgent } from '../../api/src/runtime/agent-process.js';
import { fetchHealth } from '../../contract/agent-client.js';
import { signalProcessGroup } from '../../lib/process-group.js';
import { eventually } from '../support/eventually.js';
import { agentAuth, testAgentTokens } from '../support/agent-access.js';

/**
 * An agent as the embedded runtime starts it runs without a JIT (AGENT_NODE_FLAGS): V8
 * then maps no executable memory of its own, which is what --jitless saves (code space
 * and the compilers' output) on every idle agent. bench/memory.ts measures the rest.
 */

const agentEntry = path.resolve(import.meta.dirname, '../../dist/agent/src/main.js');
let scratch: string;

beforeAll(async () => {
  scratch = await mkdtemp(path.join(os.tmpdir(), 'bp-agent-memory-'));
  // Chromium runs as the browser user and must reach its work dir inside.
  await chmod(scratch, 0o711);
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

  it('loads what an idle browser needs and no more: no zod, no computer, stealth or reset code', async () => {
    const { loaded, stderr } = await modulesLoaded('agent-lean-modules', {}, { proxy: null });
    expect(loaded.some((module) => module.includes('/node_modules/ws/')), stderr).toBe(true);
    expect(loaded.filter((module) => /\/node_modules\/zod\/|\/agent\/src\/(computer|stealth|reset)\b/.test(module))).toEqual([]);
  }, 60_000);

  it('reads a telemetry spec and a /settings telemetry body without zod (a pool browser with telemetry, a lease’s override)', async () => {
    // Nothing listens at the ingest URL: the agent only queues what it would send.
    const telemetry = { ingestUrl: 'http://127.0.0.1:9/internal/browsers/agent-lean-telemetry/telemetry?token=1.x', categories: ['console', 'network'] };
    const { loaded, stderr } = await modulesLoaded('agent-lean-telemetry', { telemetry }, { telemetry: { ...telemetry, categories: ['console'] } });
    expect(loaded.some((module) => module.includes('/agent/src/telemetry/')), stderr).toBe(true);
    expect(loaded.filter((module) => module.includes('/node_modules/zod/'))).toEqual([]);
  }, 60_000);
});

/**
 * Starts an agent with `spec`, sends it `settings` as the service would, shuts it down,
 * and returns every ES module it loaded (named on stderr by a loader hook, a thread of its own).
 */
async function modulesLoaded(browserId: string, spec: Record<string, unknown>, settings: Record<string, unknown>): Promise<{ loaded: string[]; stderr: string }> {
  const hooks = `export async function load(url, context, next) { if (url.startsWith('file:')) process.stderr.write('LOADED ' + url + '\\n'); return next(url, context); }`;
  const register = `import { register } from 'node:module'; register(${JSON.stringify(`data:text/javascript,${encodeURIComponent(hooks)}`)});`;
  const portFile = path.join(scratch, `${browserId}.port`);
  const child = spawn(process.execPath, [...AGENT_NODE_FLAGS, '--import', `data:text/javascript,${encodeURIComponent(register)}`, agentEntry], {
    env: { PATH: process.env.PATH, AGENT_SPEC: JSON.stringify({ browserId, headless: true, ...spec }), AGENT_TOKEN: testAgentTokens(browserId), AGENT_PORT: '0', AGENT_PORT_FILE: portFile, AGENT_WORK_DIR: path.join(scratch, browserId), LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise((resolve) => child.once('exit', resolve));
  try {
    const url = await eventually(
      async () => {
        const port = await readReportedPort(portFile);
        const url = port === undefined ? undefined : `http://127.0.0.1:${port}`;
        return url && (await fetchHealth({ url, token: testAgentTokens(browserId) }, 500))?.status === 'ready' ? url : undefined;
      },
      { timeoutMs: 20_000, intervalMs: 50, what: 'the agent to be ready', detail: () => stderr },
    );
    // The service's own requests to an idle browser: plain bodies, read without zod.
    const applied = await fetch(`${url}/settings`, { method: 'POST', headers: { ...agentAuth(browserId), 'content-type': 'application/json' }, body: JSON.stringify(settings) });
    expect(applied.status, await applied.clone().text()).toBe(200);
    await fetch(`${url}/shutdown`, { method: 'POST', headers: { ...agentAuth(browserId), 'content-type': 'application/json' }, body: JSON.stringify({ grace_ms: 5000 }) });
    await exited;
  } finally {
    child.kill('SIGTERM');
    await exited;
  }
  return { loaded: stderr.split('\n').filter((line) => line.startsWith('LOADED ')).map((line) => line.slice('LOADED '.length)), stderr };
}
