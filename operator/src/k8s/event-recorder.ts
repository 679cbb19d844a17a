/**
 * Kubernetes Events (events.k8s.io/v1) about the resources the operator reconciles: what
 * `kubectl describe` and `kubectl events` show next to the status conditions.
 *
 * Modelled on client-go's tools/events recorder:
 * - each Event names the object it is about (`regarding`), the controller and replica
 *   that saw it (`reportingController`, `reportingInstance`), what was done (`action`), a
 *   CamelCase `reason`, a human `note` (at most 1 KiB) and `type` Normal or Warning;
 * - an Event is named `<object name>.<hex nanoseconds>` and lives in the object's
 *   namespace (the API server refuses any other);
 * - a repeat of the same (object, action, reason, note) within the series window does not
 *   make a new Event: the first one becomes a series, `series: {count, lastObservedTime}`,
 *   patched in place.
 *
 * Unlike client-go, which writes series counts past 2 only on a 30-minute heartbeat, a
 * series is patched at once when the object's rate budget allows and otherwise as soon as
 * it does, so `kubectl describe` shows "(x5 over 2m)" while it is still happening.
 *
 * Recording never throws and never blocks a reconcile: writes run in the background,
 * one after another per event, and a failed write (RBAC, a deleted namespace, an API
 * server restart) is logged and dropped. Events are a courtesy to the reader, the status
 * conditions are the truth. Memory is bounded: at most `maxSeries` series and `maxObjects`
 * rate buckets are remembered, the oldest dropped first.
 */
import { EventsV1Api, PatchStrategy, setHeaderOptions, V1MicroTime, type EventsV1Event, type KubeConfig } from '@kubernetes/client-node';

export type EventType = 'Normal' | 'Warning';

/** The object an Event is about (an ObjectReference). */
export interface EventRegarding {
  apiVersion: string;
  kind: string;
  name: string;
  namespace: string;
  uid?: string;
}

export interface EventInput {
  type: EventType;
  /** CamelCase, machine-readable: why (e.g. PodReady, LaunchFailed). */
  reason: string;
  /** CamelCase, what was done or attempted (e.g. Launch, Terminate). */
  action: string;
  /** For humans; truncated to 1 KiB. */
  note: string;
}

export interface EventRecorder {
  /** Records (or counts a repeat of) an event; returns at once and never throws. */
  record(regarding: EventRegarding, event: EventInput): void;
  /** Resolves when every write started so far has finished (tests, shutdown); series updates still waiting for the object's budget are not waited for. */
  flush(): Promise<void>;
}

export interface EventRecorderLog {
  debug(fields: object, message: string): void;
  warn(fields: object, message: string): void;
}

export interface EventRecorderOptions {
  config: KubeConfig;
  /** e.g. browserplane.dev/operator */
  reportingController: string;
  /** This replica: the pod name. */
  reportingInstance: string;
  log: EventRecorderLog;
  /** Writes one object may make at once (creates and series patches alike). */
  burst?: number;
  /** How fast an object's budget refills, in writes per second. */
  refillPerSecond?: number;
  /** A repeat later than this after the last one starts a new Event (client-go: 6 minutes). */
  seriesWindowMs?: number;
  maxSeries?: number;
  maxObjects?: number;
  now?: () => Date;
}

/** The API server refuses longer notes (events.k8s.io/v1 validation). */
export const MAX_NOTE_LENGTH = 1024;

interface Series {
  namespace: string;
  name: string;
  count: number;
  lastObservedTime: Date;
  /** Count the API server has (0 before the create succeeded). */
  written: number;
  /** Writes of this series run one after another: a patch never overtakes its create. */
  chain: Promise<void>;
  /** A timer waiting for the object's budget to write the newest count. */
  waiting?: NodeJS.Timeout;
  objectKey: string;
}

interface Bucket {
  tokens: number;
  at: number;
}

/** client-go's `<name>.<hex UnixNano>`; the sequence keeps two events in one millisecond apart. */
function eventName(objectName: string, at: Date, sequence: number): string {
  const nanos = BigInt(at.getTime()) * 1_000_000n + BigInt(sequence % 1_000_000);
  return `${objectName}.${nanos.toString(16)}`;
}

function truncate(note: string): string {
  return note.length <= MAX_NOTE_LENGTH ? note : `${note.slice(0, MAX_NOTE_LENGTH - 3)}...`;
}

/** Map as a bounded LRU: touching an entry moves it to the back, the front is evicted. */
function touch<V>(map: Map<string, V>, key: string, value: V, max: number, evicted?: (value: V) => void): void {
  map.delete(key);
  map.set(key, value);
  while (map.size > max) {
    const [oldest, old] = map.entries().next().value as [string, V];
    map.delete(oldest);
    evicted?.(old);
  }
}

export function createEventRecorder(options: EventRecorderOptions): EventRecorder {
  const api = options.config.makeApiClient(EventsV1Api);
  const now = options.now ?? (() => new Date());
  const burst = options.burst ?? 25;
  const refillPerSecond = options.refillPerSecond ?? 0.2;
  const windowMs = options.seriesWindowMs ?? 6 * 60_000;
  const series = new Map<string, Series>();
  const buckets = new Map<string, Bucket>();
  const inFlight = new Set<Promise<void>>();
  let sequence = 0;
  let refusalWarned = false;

  /** Takes one write from the object's budget, or answers how long until one is there. */
  function take(objectKey: string): number {
    const at = now().getTime();
    const bucket = buckets.get(objectKey) ?? { tokens: burst, at };
    bucket.tokens = Math.min(burst, bucket.tokens + ((at - bucket.at) / 1000) * refillPerSecond);
    bucket.at = at;
    touch(buckets, objectKey, bucket, options.maxObjects ?? 4096);
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      return 0;
    }
    return Math.ceil(((1 - bucket.tokens) / refillPerSecond) * 1000);
  }

  function track(work: Promise<void>): void {
    inFlight.add(work);
    void work.finally(() => inFlight.delete(work));
  }

  function failed(entry: Series, error: unknown, what: string): void {
    const code = (error as { code?: number }).code;
    const fields = { event: `${entry.namespace}/${entry.name}`, code, err: error instanceof Error ? error.message : String(error) };
    // Forbidden (RBAC) or a namespace being deleted: a configuration matter, worth one
    // warning per process; repeating it for every event would drown the log.
    if (code === 403 || code === 404) {
      if (refusalWarned) options.log.debug(fields, `event ${what} refused; dropped`);
      else options.log.warn(fields, `event ${what} refused; dropped`);
      refusalWarned = true;
    } else options.log.warn(fields, `event ${what} failed; dropped`);
  }

  function forget(entry: Series): void {
    for (const [key, value] of series) if (value === entry) series.delete(key);
  }

  /** Patches the newest count of a series once its create has succeeded and the budget allows. */
  function writeSeries(entry: Series): void {
    // Before the create succeeded there is nothing to patch: the create's completion calls again.
    if (entry.waiting || entry.written === 0 || entry.count === entry.written) return;
    const waitMs = take(entry.objectKey);
    if (waitMs > 0) {
      entry.waiting = setTimeout(() => {
        entry.waiting = undefined;
        writeSeries(entry);
      }, waitMs);
      entry.waiting.unref();
      return;
    }
    entry.chain = entry.chain.then(async () => {
      if (entry.count === entry.written) return;
      const count = entry.count;
      try {
        await api.patchNamespacedEvent(
          { name: entry.name, namespace: entry.namespace, body: { series: { count, lastObservedTime: new V1MicroTime(entry.lastObservedTime) } } },
          // A merge patch touches series alone (client-go sends the same as a strategic merge patch).
          setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
        );
        entry.written = count;
      } catch (error) {
        failed(entry, error, 'series update');
        // The Event expired (the API server keeps them an hour) or was deleted: the next repeat creates it anew, as client-go does.
        if ((error as { code?: number }).code === 404) forget(entry);
      }
    });
    track(entry.chain);
  }

  return {
    record(regarding, event) {
      try {
        const at = now();
        const objectKey = regarding.uid ?? `${regarding.kind}/${regarding.namespace}/${regarding.name}`;
        const key = JSON.stringify([objectKey, event.action, event.reason, event.note]);
        const existing = series.get(key);
        if (existing && at.getTime() - existing.lastObservedTime.getTime() <= windowMs) {
          existing.count += 1;
          existing.lastObservedTime = at;
          touch(series, key, existing, options.maxSeries ?? 1024);
          writeSeries(existing);
          return;
        }
        if (take(objectKey) > 0) {
          options.log.debug({ object: objectKey, reason: event.reason }, 'event rate limit reached for the object; dropped');
          return;
        }
        const entry: Series = { namespace: regarding.namespace, name: eventName(regarding.name, at, sequence++), count: 1, lastObservedTime: at, written: 0, chain: Promise.resolve(), objectKey };
        touch(series, key, entry, options.maxSeries ?? 1024, (old) => old.waiting && clearTimeout(old.waiting));
        const body: EventsV1Event = {
          apiVersion: 'events.k8s.io/v1',
          kind: 'Event',
          metadata: { name: entry.name, namespace: regarding.namespace },
          // MicroTime serialises with microseconds, as the API server expects.
          eventTime: new V1MicroTime(at),
          reportingController: options.reportingController,
          reportingInstance: options.reportingInstance,
          action: event.action,
          reason: event.reason,
          note: truncate(event.note),
          type: event.type,
          regarding: { apiVersion: regarding.apiVersion, kind: regarding.kind, name: regarding.name, namespace: regarding.namespace, ...(regarding.uid ? { uid: regarding.uid } : {}) },
        };
        entry.chain = api.createNamespacedEvent({ namespace: regarding.namespace, body }).then(
          () => {
            entry.written = 1;
            // Repeats that came while the create was in flight.
            writeSeries(entry);
          },
          (error: unknown) => {
            failed(entry, error, 'create');
            // A later repeat tries a fresh create rather than patching nothing.
            forget(entry);
          },
        );
        track(entry.chain);
      } catch (error) {
        options.log.warn({ err: error instanceof Error ? error.message : String(error) }, 'recording an event failed; dropped');
      }
    },
    async flush() {
      while (inFlight.size > 0) await Promise.allSettled([...inFlight]);
    },
  };
}
