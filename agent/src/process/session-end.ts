/**
 * The hook the agent's shutdown and a pool reset call to end what the session started:
 * its processes, its recordings. A module of its own, with nothing to load: the process
 * routes (and node-pty) and the replay routes load on first use only, and register here
 * when they do, each under its own name.
 */

const enders = new Map<string, () => Promise<void>>();

export function whenSessionEnds(end: () => Promise<void>, name = 'process'): void {
  enders.set(name, end);
}

/** Runs every ender (together; a failure of one does not stop the others); nothing to do when none registered. */
export async function endSessionProcesses(): Promise<void> {
  const results = await Promise.allSettled([...enders.values()].map((end) => end()));
  const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) throw failed.reason;
}
