/**
 * The auth caches of this process (auth-cache.ts), for the stores that write api_keys,
 * projects and orgs to drop at once. Apart from the cache so those stores need not import
 * it (projects and orgs sit below api-keys).
 */
const liveCaches = new Set<WeakRef<{ drop(): void }>>();

export function registerAuthCache(cache: { drop(): void }): void {
  liveCaches.add(new WeakRef(cache));
}

/**
 * Called by this process's writes to api_keys, projects and orgs: drops every cache here,
 * so the writer's next request cannot meet the old answer. The trigger's notification
 * does the same a moment later on every replica (this one included).
 */
export function noteAuthChange(): void {
  for (const ref of liveCaches) {
    const cache = ref.deref();
    if (cache) cache.drop();
    else liveCaches.delete(ref);
  }
}
