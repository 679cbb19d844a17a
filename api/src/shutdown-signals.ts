/**
 * What a SIGTERM or SIGINT means, counted from the first one.
 *
 * `make run` is the common way in, and GNU make forwards a SIGTERM it receives to its
 * child: `kill -- -PGID` (or a supervisor signalling the group) therefore delivers two
 * signals to this process within milliseconds. Exiting on the second one used to abandon
 * the embedded Postgres and every browser, so:
 * - the first signal starts the orderly stop;
 * - the same signal within REPEAT_WINDOW_MS of the last one counted is one request
 *   delivered twice (the group's and make's copy) and changes nothing; a different
 *   signal (SIGINT after SIGTERM) always counts;
 * - a later second signal hurries the stop (requests still open are cut now) but the
 *   cleanup still runs to the end: Postgres and the browsers are stopped;
 * - only a third cuts the cleanup short (or SIGKILL, which nothing can catch; the next
 *   start then stops the Postgres left running).
 */
export type SignalVerdict = 'stop' | 'repeat' | 'hurry' | 'abandon';

/** How close together two signals must come to count as one delivered twice. */
export const REPEAT_WINDOW_MS = 1000;

export function signalPolicy(now: () => number = () => performance.now()): (signal: NodeJS.Signals) => SignalVerdict {
  let counted = 0;
  let last: { signal: NodeJS.Signals; at: number } | undefined;
  return (signal) => {
    const at = now();
    // From the last signal counted, so Ctrl-C pressed again and again still escalates.
    if (last && last.signal === signal && at - last.at < REPEAT_WINDOW_MS) return 'repeat';
    last = { signal, at };
    counted++;
    return counted === 1 ? 'stop' : counted === 2 ? 'hurry' : 'abandon';
  };
}
