import pg from 'pg';
import type { Logger } from 'pino';
import { DEFAULT_DATABASE_TIMEOUTS, timeoutOptions, type DatabaseTimeouts } from '../db/pool.js';

/**
 * Change notifications across API replicas through Postgres LISTEN/NOTIFY. One
 * dedicated connection per process listens; subscribers register per channel. Payloads
 * are small JSON (ids and states): subscribers re-read the row when they need more.
 * The listening connection is re-established after a failure, and subscribers are told
 * (`onReconnect`), since notifications sent while it was down are lost; those that must
 * not act on state the lost notifications would have changed (a cache) are also told when
 * it goes down (`onDisconnect`).
 */
export interface EventHub {
  publish(channel: string, payload: unknown, db?: Pick<pg.Pool, 'query'>): Promise<void>;
  subscribe(
    channel: string,
    handler: (payload: unknown) => void,
    onReconnect?: () => void,
    onDisconnect?: () => void,
  ): Promise<() => Promise<void>>;
  close(): Promise<void>;
}

/** Channel names are identifiers: a prefix plus a hash-free, quoted id. */
export function channelName(kind: string, id: string): string {
  return `bp:${kind}:${id}`;
}

export function createPgEventHub(
  connectionString: string,
  publisher: Pick<pg.Pool, 'query'>,
  log: Logger,
  timeouts: DatabaseTimeouts = DEFAULT_DATABASE_TIMEOUTS,
): EventHub {
  const handlers = new Map<
    string,
    Set<{ onEvent: (payload: unknown) => void; onReconnect?: (() => void) | undefined; onDisconnect?: (() => void) | undefined }>
  >();
  let client: pg.Client | undefined;
  let connecting: Promise<pg.Client> | undefined;
  let closed = false;
  const disconnected = () => {
    for (const subs of handlers.values()) for (const sub of subs) sub.onDisconnect?.();
  };

  const connect = (): Promise<pg.Client> => {
    connecting ??= (async () => {
      // Bounded like the pool's: a subscribe (an SSE request) must not hang on a frozen
      // server. Waiting for notifications runs no statement, so no timeout cuts it.
      const c = new pg.Client({ connectionString, application_name: 'browserplane-events', ...timeoutOptions(timeouts) });
      c.on('notification', (message) => {
        const subs = handlers.get(message.channel);
        if (!subs) return;
        let payload: unknown = message.payload;
        try {
          payload = JSON.parse(message.payload ?? 'null');
        } catch {
          // not JSON: hand over the text
        }
        for (const sub of subs) sub.onEvent(payload);
      });
      c.on('error', (error) => {
        log.warn({ err: error }, 'event listener connection failed; reconnecting');
        client = undefined;
        connecting = undefined;
        disconnected();
        void reconnect();
      });
      try {
        await c.connect();
        for (const channel of handlers.keys()) await c.query(`LISTEN ${pg.escapeIdentifier(channel)}`);
      } catch (error) {
        // A LISTEN the client gave up on is still in flight: this connection is not used again.
        void c.end().catch(() => undefined);
        throw error;
      }
      client = c;
      return c;
    })();
    return connecting;
  };

  const reconnect = async (): Promise<void> => {
    for (let attempt = 0; !closed; attempt++) {
      try {
        await connect();
        for (const subs of handlers.values()) for (const sub of subs) sub.onReconnect?.();
        return;
      } catch (error) {
        connecting = undefined;
        log.warn({ err: error, attempt }, 'event listener reconnect failed');
        await new Promise((resolve) => setTimeout(resolve, Math.min(5000, 100 * 2 ** attempt)));
      }
    }
  };

  return {
    async publish(channel, payload, db = publisher) {
      await db.query('SELECT pg_notify($1, $2)', [channel, JSON.stringify(payload)]);
    },
    async subscribe(channel, onEvent, onReconnect, onDisconnect) {
      const c = client ?? (await connect());
      let subs = handlers.get(channel);
      if (!subs) {
        subs = new Set();
        handlers.set(channel, subs);
        try {
          await c.query(`LISTEN ${pg.escapeIdentifier(channel)}`);
        } catch (error) {
          handlers.delete(channel);
          // Timed out or broken: the connection may have missed notifications or hold a
          // statement in flight; drop it and listen again on a new one (subscribers are told).
          if (client === c) {
            client = undefined;
            connecting = undefined;
            void c.end().catch(() => undefined);
            disconnected();
            void reconnect();
          }
          throw error;
        }
      }
      const sub = { onEvent, onReconnect, onDisconnect };
      subs.add(sub);
      return async () => {
        subs.delete(sub);
        if (subs.size === 0 && handlers.get(channel) === subs) {
          handlers.delete(channel);
          await client?.query(`UNLISTEN ${pg.escapeIdentifier(channel)}`).catch(() => undefined);
        }
      };
    },
    async close() {
      closed = true;
      handlers.clear();
      await client?.end().catch(() => undefined);
    },
  };
}
