/**
 * The hook the agent's shutdown and a pool reset call to end the session's processes.
 * A module of its own, with nothing to load: the process routes (and node-pty) load on
 * first use only, and register here when they do.
 */

let ender: (() => Promise<void>) | undefined;

export function whenSessionEnds(end: () => Promise<void>): void {
  ender = end;
}

/** Kills every process of the session and forgets the exited ones; nothing to do when none was ever started. */
export async function endSessionProcesses(): Promise<void> {
  await ender?.();
}
