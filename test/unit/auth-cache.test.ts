import { describe, expect, it } from 'vitest';
import { FixedClock } from '../../api/src/clock.js';
import type { EventHub } from '../../api/src/events/hub.js';
import { AUTH_CHANGED_CHANNEL, AuthCache } from '../../api/src/modules/api-keys/auth-cache.js';
import { noteAuthChange } from '../../api/src/modules/api-keys/auth-changes.js';
import type { RequestKey } from '../../api/src/modules/api-keys/store.js';

/** An event hub whose LISTEN succeeds or fails on demand, and whose connection the test can drop and bring back. */
class FakeHub implements EventHub {
  subscribers: { channel: string; onEvent: (p: unknown) => void; onReconnect?: () => void; onDisconnect?: () => void }[] = [];
  failNext = false;
  private pending: (() => void)[] = [];

  publish(): Promise<void> {
    return Promise.resolve();
  }
  subscribe(channel: string, onEvent: (p: unknown) => void, onReconnect?: () => void, onDisconnect?: () => void) {
    if (this.failNext) {
      this.failNext = false;
      return Promise.reject(new Error('LISTEN failed'));
    }
    this.subscribers.push({ channel, onEvent, ...(onReconnect ? { onReconnect } : {}), ...(onDisconnect ? { onDisconnect } : {}) });
    return new Promise<() => Promise<void>>((resolve) => this.pending.push(() => resolve(() => Promise.resolve())));
  }
  /** The LISTEN statements answer. */
  confirm(): Promise<void> {
    for (const done of this.pending.splice(0)) done();
    return flush();
  }
  notify(): void {
    for (const s of this.subscribers) s.onEvent('api_keys');
  }
  disconnect(): void {
    for (const s of this.subscribers) s.onDisconnect?.();
  }
  reconnect(): void {
    for (const s of this.subscribers) s.onReconnect?.();
  }
  close(): Promise<void> {
    return Promise.resolve();
  }
}

const flush = () => new Promise<void>((resolve) => setImmediate(resolve));

const row = (id: string): RequestKey => ({
  id,
  name: id,
  org_id: 'org_1',
  project_id: null,
  expires_at: null,
  deleted_at: null,
  invocation_id: null,
  implicit_project_id: 'proj_1',
  implicit_project_name: 'default',
});

/** A database stand-in that counts its reads and answers what `current` holds. */
function database(initial: RequestKey | undefined) {
  const db = {
    current: initial,
    reads: 0,
    load: () => {
      db.reads++;
      return Promise.resolve(db.current);
    },
  };
  return db;
}

async function listeningCache(options?: { maxEntries?: number; ttlMs?: number }) {
  const hub = new FakeHub();
  const clock = new FixedClock(new Date('2030-01-01T00:00:00Z'));
  const cache = new AuthCache(hub, clock, { maxEntries: options?.maxEntries ?? 100, ttlMs: options?.ttlMs ?? 30_000, retryMs: 1000 });
  // The first lookup starts listening; until LISTEN answers it reads the database.
  await cache.lookup(Buffer.from('warm-up'), () => Promise.resolve(undefined));
  await hub.confirm();
  return { hub, clock, cache };
}

describe('AuthCache', () => {
  it('reads a key once while it listens, and again after any change is notified', async () => {
    const { hub, cache } = await listeningCache();
    expect(hub.subscribers.map((s) => s.channel)).toEqual([AUTH_CHANGED_CHANNEL]);
    const db = database(row('key_1'));
    const hash = Buffer.from('a');
    await cache.lookup(hash, db.load);
    await cache.lookup(hash, db.load);
    expect(db.reads).toBe(1);

    db.current = { ...row('key_1'), deleted_at: new Date() };
    hub.notify();
    expect((await cache.lookup(hash, db.load))?.deleted_at).not.toBeNull();
    expect(db.reads).toBe(2);
  });

  it('trusts nothing before LISTEN answers, nor while the listening connection is down', async () => {
    const hub = new FakeHub();
    const cache = new AuthCache(hub, new FixedClock(new Date()));
    const db = database(row('key_1'));
    const hash = Buffer.from('a');
    await cache.lookup(hash, db.load);
    await cache.lookup(hash, db.load);
    expect(db.reads).toBe(2);

    await hub.confirm();
    await cache.lookup(hash, db.load);
    await cache.lookup(hash, db.load);
    expect(db.reads).toBe(3);

    hub.disconnect();
    await cache.lookup(hash, db.load);
    await cache.lookup(hash, db.load);
    expect(db.reads).toBe(5);

    hub.reconnect();
    await cache.lookup(hash, db.load);
    await cache.lookup(hash, db.load);
    expect(db.reads).toBe(6);
  });

  it('does not keep what a read that a change overtook returned', async () => {
    const { hub, cache } = await listeningCache();
    const hash = Buffer.from('a');
    let answer: (value: RequestKey) => void = () => undefined;
    const slow = cache.lookup(hash, () => new Promise<RequestKey>((resolve) => (answer = resolve)));
    hub.notify(); // the key was revoked while the read was in flight
    answer(row('key_1'));
    await slow;
    const db = database({ ...row('key_1'), deleted_at: new Date() });
    expect((await cache.lookup(hash, db.load))?.deleted_at).not.toBeNull();
    expect(db.reads).toBe(1);
  });

  it('drops everything when this process writes keys, projects or orgs, before any notification', async () => {
    const { cache } = await listeningCache();
    const db = database(row('key_1'));
    await cache.lookup(Buffer.from('a'), db.load);
    noteAuthChange();
    await cache.lookup(Buffer.from('a'), db.load);
    expect(db.reads).toBe(2);
  });

  it('forgets an entry after its time, and the oldest entry beyond its size', async () => {
    const { clock, cache } = await listeningCache({ maxEntries: 2, ttlMs: 1000 });
    const db = database(row('key_1'));
    await cache.lookup(Buffer.from('a'), db.load);
    clock.advance(1001);
    await cache.lookup(Buffer.from('a'), db.load);
    expect(db.reads).toBe(2);

    await cache.lookup(Buffer.from('b'), db.load);
    await cache.lookup(Buffer.from('c'), db.load);
    expect(cache.size).toBe(2);
    await cache.lookup(Buffer.from('a'), db.load);
    expect(db.reads).toBe(5);
  });

  it('does not remember unknown keys', async () => {
    const { cache } = await listeningCache();
    const db = database(undefined);
    await cache.lookup(Buffer.from('guess'), db.load);
    await cache.lookup(Buffer.from('guess'), db.load);
    expect(db.reads).toBe(2);
    expect(cache.size).toBe(0);
  });

  it('reads the database when LISTEN fails, and tries again a while later', async () => {
    const hub = new FakeHub();
    hub.failNext = true;
    const clock = new FixedClock(new Date());
    const cache = new AuthCache(hub, clock, { maxEntries: 10, ttlMs: 30_000, retryMs: 1000 });
    const db = database(row('key_1'));
    await cache.lookup(Buffer.from('a'), db.load);
    await flush();
    await cache.lookup(Buffer.from('a'), db.load);
    expect(hub.subscribers).toHaveLength(0);
    clock.advance(1000);
    await cache.lookup(Buffer.from('a'), db.load);
    await hub.confirm();
    await cache.lookup(Buffer.from('a'), db.load);
    await cache.lookup(Buffer.from('a'), db.load);
    expect(db.reads).toBe(4);
  });
});
