import { readFile } from 'node:fs/promises';
import { parseFsLimits, parseProcessLimits, type ProcessLimits } from '../config.js';
import type { AgentState } from '../agent-state.js';
import { SessionRoot } from '../fs/session-root.js';
import { ProcessError } from './errors.js';
import { Sandbox } from './sandbox.js';
import { whenSessionEnds } from './session-end.js';
import { ProcessTable } from './table.js';

/**
 * One agent serves one browser, so one process table per agent, made on first use: the
 * session's root as the fs API sees it (SessionRoot, from Chromium's --user-data-dir),
 * the sandbox for it, and the table, which the agent's shutdown and a pool reset empty
 * (session-end.ts).
 */

export interface ProcessContext {
  root: SessionRoot;
  sandbox: Sandbox;
  table: ProcessTable;
  limits: ProcessLimits;
  /** Names as_user accepts: the session user's uid, and its name when /etc/passwd has one. */
  userNames: Set<string>;
}

let context: Promise<ProcessContext> | undefined;

export function processContext(state: AgentState): Promise<ProcessContext> {
  const chromium = state.chromium();
  if (state.phase() !== 'ready' || !chromium) throw new ProcessError(503, 'not_ready', 'browser not ready');
  if (!context) {
    // Read here rather than passed in AgentState (as the fs routes do); main.ts does not parse them at start.
    const limits = parseProcessLimits(process.env);
    const made = (async () => {
      const root = await SessionRoot.ofChromium(chromium.pid, parseFsLimits(process.env));
      const user = root.identity();
      const sandbox = await Sandbox.create(root.hostRoot, user, chromium.display, limits.maxTasks);
      return { root, sandbox, table: new ProcessTable(limits, sandbox), limits, userNames: await namesOf(user.uid) };
    })();
    made.catch(() => (context = undefined));
    context = made;
  }
  return context;
}

async function namesOf(uid: number): Promise<Set<string>> {
  const names = new Set([String(uid)]);
  const passwd = await readFile('/etc/passwd', 'utf8').catch(() => '');
  for (const line of passwd.split('\n')) {
    const [name, , id] = line.split(':');
    if (name && Number(id) === uid) names.add(name);
  }
  return names;
}

whenSessionEnds(async () => {
  const current = await context?.catch(() => undefined);
  await current?.table.endAll();
});
