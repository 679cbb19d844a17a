/**
 * Leader election on a coordination.k8s.io/v1 Lease, following client-go's
 * `tools/leaderelection` (the scheme kube-controller-manager and every controller-runtime
 * operator use), so operators of different makes judge one Lease alike:
 *
 * - The holder renews the Lease every retry period. It gives up leading when it has not
 *   managed a renewal for `renewDeadline` (shorter than the lease duration), so it stops
 *   acting before anyone else may start.
 * - A candidate takes the Lease over only when the record has not changed for a whole
 *   lease duration *as measured on the candidate's own clock* since it last saw it change.
 *   Comparing `renewTime` against the local clock would trust clocks across machines.
 * - Every write is a compare-and-swap on resourceVersion, so of two candidates racing for
 *   an expired Lease exactly one wins (the other gets 409 Conflict).
 * - On a clean stop the holder releases the Lease (empty holder) so a successor starts at
 *   once instead of after a lease duration.
 *
 * @kubernetes/client-node has no leader election of its own; the npm packages that wrap
 * one are small single-author projects, so this module is ours, with the decision a pure
 * function tested by table.
 */

/** The Lease spec fields leader election reads and writes. Times are RFC 3339 (MicroTime). */
export interface LeaseRecord {
  holderIdentity: string;
  leaseDurationSeconds: number;
  acquireTime: string;
  renewTime: string;
  leaseTransitions: number;
}

export interface StoredLease {
  record: LeaseRecord;
  resourceVersion: string;
}

/** Reads and compare-and-swaps one Lease. create/update answer false on 409 (lost a race). */
export interface LeaseStore {
  get(): Promise<StoredLease | undefined>;
  create(record: LeaseRecord): Promise<boolean>;
  update(record: LeaseRecord, resourceVersion: string): Promise<boolean>;
}

export type LeaseDecision =
  | { action: 'create' | 'renew' | 'take-over'; record: LeaseRecord }
  | { action: 'wait'; holder: string; expiresInMs: number };

export interface DecideInput {
  lease: StoredLease | undefined;
  identity: string;
  now: number;
  /** Local time at which this candidate last saw the record change. */
  observedChangeAt: number;
  leaseDurationMs: number;
}

/** What a candidate should do about the Lease as it stands. Pure. */
export function decideLease({ lease, identity, now, observedChangeAt, leaseDurationMs }: DecideInput): LeaseDecision {
  const stamp = new Date(now).toISOString();
  const seconds = Math.ceil(leaseDurationMs / 1000);
  if (!lease) {
    return {
      action: 'create',
      record: { holderIdentity: identity, leaseDurationSeconds: seconds, acquireTime: stamp, renewTime: stamp, leaseTransitions: 0 },
    };
  }
  const { record } = lease;
  if (record.holderIdentity === identity) {
    return { action: 'renew', record: { ...record, leaseDurationSeconds: seconds, renewTime: stamp } };
  }
  // The holder's own duration rules its lease, as written in the record.
  const heldFor = (record.leaseDurationSeconds > 0 ? record.leaseDurationSeconds * 1000 : leaseDurationMs) - (now - observedChangeAt);
  if (record.holderIdentity === '' || heldFor <= 0) {
    return {
      action: 'take-over',
      record: {
        holderIdentity: identity,
        leaseDurationSeconds: seconds,
        acquireTime: stamp,
        renewTime: stamp,
        leaseTransitions: record.leaseTransitions + 1,
      },
    };
  }
  return { action: 'wait', holder: record.holderIdentity, expiresInMs: heldFor };
}

export interface LeaderElectorOptions {
  identity: string;
  store: LeaseStore;
  /** client-go's defaults: 15 s, 10 s, 2 s. */
  leaseDurationMs?: number;
  renewDeadlineMs?: number;
  retryPeriodMs?: number;
  /**
   * Starts the leader's work; `signal` aborts when leadership is lost or the elector stops.
   * The promise it may return settles when that work has stopped: on a clean stop the Lease
   * is released only then (bounded by the renew deadline), so a successor never acts
   * beside reconciles still draining here.
   */
  onStartedLeading(signal: AbortSignal): void | Promise<void>;
  onStoppedLeading?(): void;
  /** Another (or this) identity was seen holding the Lease. */
  onNewLeader?(identity: string): void;
  /** A Lease read or write failed (network, 5xx): logged, then retried. */
  onError?(error: unknown): void;
}

export class LeaderElector {
  private readonly leaseDurationMs: number;
  private readonly renewDeadlineMs: number;
  private readonly retryPeriodMs: number;
  private observed: { key: string; at: number } | undefined;
  private lastLeader: string | undefined;
  private leading = false;

  constructor(private readonly options: LeaderElectorOptions) {
    this.leaseDurationMs = options.leaseDurationMs ?? 15_000;
    this.renewDeadlineMs = options.renewDeadlineMs ?? 10_000;
    this.retryPeriodMs = options.retryPeriodMs ?? 2_000;
    if (!(this.leaseDurationMs > this.renewDeadlineMs && this.renewDeadlineMs > this.retryPeriodMs)) {
      throw new Error('leader election needs leaseDuration > renewDeadline > retryPeriod');
    }
  }

  get isLeader(): boolean {
    return this.leading;
  }

  /**
   * Campaigns until it leads, leads until it loses the Lease or `signal` aborts, then
   * returns. A lost lease is final for this run: like client-go, the caller is expected to
   * exit (and be restarted) rather than campaign again with work half-stopped.
   */
  async run(signal: AbortSignal): Promise<'lost' | 'stopped'> {
    while (!signal.aborted && !(await this.tryAcquireOrRenew())) {
      // Jitter (client-go's factor 1.2) keeps candidates from polling in lockstep.
      await sleep(this.retryPeriodMs * (1 + Math.random() * 0.2), signal);
    }
    if (signal.aborted) return 'stopped';

    const leadership = new AbortController();
    this.leading = true;
    const work = this.options.onStartedLeading(leadership.signal);
    let lastRenewal = Date.now();
    let outcome: 'lost' | 'stopped' = 'stopped';
    while (!signal.aborted) {
      await sleep(this.retryPeriodMs, signal);
      if (signal.aborted) break;
      if (await this.tryAcquireOrRenew()) {
        lastRenewal = Date.now();
      } else if (!this.leading || Date.now() - lastRenewal >= this.renewDeadlineMs) {
        outcome = 'lost';
        break;
      }
    }
    this.leading = false;
    leadership.abort();
    if (outcome === 'stopped') {
      // Still the holder until released, and not renewing: the wait stays within the
      // renew deadline, so the Lease is handed back well before it would expire anyway.
      await settledWithin(work, this.renewDeadlineMs);
      this.options.onStoppedLeading?.();
      await this.release();
    } else {
      this.options.onStoppedLeading?.();
    }
    return outcome;
  }

  /** One attempt; true when this identity holds the Lease afterwards. */
  private async tryAcquireOrRenew(): Promise<boolean> {
    try {
      const lease = await this.options.store.get();
      const now = Date.now();
      if (lease) {
        const key = lease.resourceVersion;
        if (this.observed?.key !== key) this.observed = { key, at: now };
        this.noteLeader(lease.record.holderIdentity);
      }
      const decision = decideLease({
        lease,
        identity: this.options.identity,
        now,
        observedChangeAt: this.observed?.at ?? now,
        leaseDurationMs: this.leaseDurationMs,
      });
      if (decision.action === 'wait') {
        // Someone else holds it: if we believed we led, we do not any more.
        this.leading = false;
        return false;
      }
      const written =
        decision.action === 'create'
          ? await this.options.store.create(decision.record)
          : await this.options.store.update(decision.record, lease!.resourceVersion);
      if (written) this.noteLeader(this.options.identity);
      return written;
    } catch (error) {
      this.options.onError?.(error);
      return false;
    }
  }

  /** Hands the Lease back so a successor need not wait out the duration. */
  private async release(): Promise<void> {
    try {
      const lease = await this.options.store.get();
      if (!lease || lease.record.holderIdentity !== this.options.identity) return;
      const stamp = new Date().toISOString();
      await this.options.store.update(
        { ...lease.record, holderIdentity: '', leaseDurationSeconds: 1, renewTime: stamp },
        lease.resourceVersion,
      );
    } catch (error) {
      this.options.onError?.(error);
    }
  }

  private noteLeader(identity: string): void {
    if (identity && identity !== this.lastLeader) {
      this.lastLeader = identity;
      this.options.onNewLeader?.(identity);
    }
  }
}

async function settledWithin(work: void | Promise<void>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<void>((resolve) => (timer = setTimeout(resolve, ms)));
  // Whatever a caller's callback returned (plain JavaScript callers return anything).
  await Promise.race([Promise.resolve(work).catch(() => undefined), deadline]);
  clearTimeout(timer);
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done(): void {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}
