import type { Clock } from '../../clock.js';

/** Entries one replica keeps at most, over every provider of every org; the oldest go first. */
export const MAX_CACHE_ENTRIES = 1000;

/**
 * What a provider answered, kept in this replica's memory for at most the provider's
 * cache_ttl_seconds (never in Postgres). Keys carry the provider's id and its updated_at,
 * so a changed provider (new token, URL or TTL) never reads what the old one answered.
 */
export class ProviderCache {
  private readonly entries = new Map<string, { expiresAt: number; value: unknown }>();

  constructor(private readonly clock: Clock) {}

  async getOrLoad<T>(key: string, ttlSeconds: number, load: () => Promise<T>): Promise<T> {
    if (ttlSeconds <= 0) return load();
    const now = this.clock.now().getTime();
    const hit = this.entries.get(key);
    if (hit && hit.expiresAt > now) return hit.value as T;
    this.entries.delete(key);
    const value = await load();
    this.entries.set(key, { expiresAt: now + ttlSeconds * 1000, value });
    while (this.entries.size > MAX_CACHE_ENTRIES) this.entries.delete(this.entries.keys().next().value!);
    return value;
  }

  /** Drops everything a provider answered (deleted or changed). */
  forget(providerId: string): void {
    for (const key of this.entries.keys()) if (key.startsWith(`${providerId}:`)) this.entries.delete(key);
  }
}

/**
 * One cache per app. Keyed by the app's database pool, which each composed app has its
 * own of, so test apps in one process do not share what their providers answered.
 */
const caches = new WeakMap<object, ProviderCache>();

export function cacheOf(deps: { db: object; clock: Clock }): ProviderCache {
  let cache = caches.get(deps.db);
  if (!cache) {
    cache = new ProviderCache(deps.clock);
    caches.set(deps.db, cache);
  }
  return cache;
}
