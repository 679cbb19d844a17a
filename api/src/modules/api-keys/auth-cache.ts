import type { Clock } from '../../clock.js';
import type { EventHub } from '../../events/hub.js';
import { registerAuthCache } from './auth-changes.js';
import type { RequestKey } from './store.js';

/** What the migration's trigger notifies on every write to api_keys, projects or orgs. */
export const AUTH_CHANGED_CHANNEL = 'bp:auth:changed';

export interface AuthCacheOptions {
  /** Keys remembered at most; the oldest entry goes first. */
  maxEntries: number;
  /** How long an entry is trusted at most, should a notification ever be lost unnoticed. */
  ttlMs: number;
  /** After a failed LISTEN, how long requests go to the database before trying again. */
  retryMs: number;
}

export const DEFAULT_AUTH_CACHE_OPTIONS: AuthCacheOptions = { maxEntries: 10_000, ttlMs: 30_000, retryMs: 1000 };

/**
 * The presented keys this replica has looked up, by key hash, so an authenticated request
 * costs no database round trip: the acquire fast path is then one statement in all.
 *
 * Trusted only while this replica listens on AUTH_CHANGED_CHANNEL: every write that could
 * change an answer (a key deleted, expired early or renamed; a project renamed, deleted or
 * made default; an org changed) notifies it through a trigger, and the whole cache is
 * dropped, on every replica, as soon as the commit is heard. Writes of this process also
 * drop it directly (auth-changes.ts), so the writer's own next request never sees the old
 * answer, whichever of the two sockets Node reads first. While the listening connection
 * is down (notifications are lost then) every request goes to the database, as it does
 * for a key not in the cache. Expiry is checked on every request against the cached
 * expires_at, so a key still expires to the millisecond. Unknown keys are not cached:
 * guessing cannot fill the cache or push real keys out.
 */
export class AuthCache {
  private readonly entries = new Map<string, { row: RequestKey; until: number }>();
  private state: 'idle' | 'subscribing' | 'listening' = 'idle';
  private retryAt = 0;
  /** Bumped by every drop: a lookup that began before one does not store what it read. */
  private generation = 0;

  constructor(
    private readonly events: EventHub,
    private readonly clock: Clock,
    private readonly options: AuthCacheOptions = DEFAULT_AUTH_CACHE_OPTIONS,
  ) {
    registerAuthCache(this);
  }

  /** The key with this hash: from the cache while it is trusted, else from `load` (the database). */
  async lookup(hash: Buffer, load: () => Promise<RequestKey | undefined>): Promise<RequestKey | undefined> {
    const id = hash.toString('base64');
    const now = this.clock.now().getTime();
    if (this.state === 'listening') {
      const hit = this.entries.get(id);
      if (hit && hit.until > now) return hit.row;
      if (hit) this.entries.delete(id);
    } else {
      this.listen(now);
    }
    const generation = this.generation;
    const row = await load();
    if (row && this.state === 'listening' && generation === this.generation) this.store(id, row, now);
    return row;
  }

  /** Forgets every answer. */
  drop(): void {
    this.generation++;
    this.entries.clear();
  }

  get size(): number {
    return this.entries.size;
  }

  private store(id: string, row: RequestKey, now: number): void {
    this.entries.delete(id);
    this.entries.set(id, { row, until: now + this.options.ttlMs });
    if (this.entries.size > this.options.maxEntries) this.entries.delete(this.entries.keys().next().value!);
  }

  private listen(now: number): void {
    if (this.state !== 'idle' || now < this.retryAt) return;
    this.state = 'subscribing';
    this.events
      .subscribe(
        AUTH_CHANGED_CHANNEL,
        () => this.drop(),
        () => {
          this.drop();
          this.state = 'listening';
        },
        () => {
          this.drop();
          this.state = 'subscribing';
        },
      )
      .then(
        () => {
          this.drop();
          this.state = 'listening';
        },
        () => {
          this.state = 'idle';
          this.retryAt = this.clock.now().getTime() + this.options.retryMs;
        },
      );
  }
}
