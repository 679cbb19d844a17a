/**
 * Agents outlive a killed service on purpose, to be re-adopted when it starts again.
 * One whose service never comes back would run forever: with no /health request (the
 * reaper asks every 5 s) and no client for `timeoutMs`, it shuts down.
 */
export function watchForOrphaning(watch: {
  timeoutMs: number;
  lastHealthPoll: () => number;
  clients: () => number;
  shutdown: (reason: string) => void;
}): NodeJS.Timeout | undefined {
  if (watch.timeoutMs <= 0) return undefined;
  const timer = setInterval(
    () => {
      const silentMs = Date.now() - watch.lastHealthPoll();
      if (silentMs >= watch.timeoutMs && watch.clients() === 0) {
        watch.shutdown(`orphaned: no health check from the service for ${Math.round(silentMs / 1000)} s and no client`);
      }
    },
    Math.min(watch.timeoutMs, 30_000),
  );
  timer.unref();
  return timer;
}
