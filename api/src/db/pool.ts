import { createHash } from 'node:crypto';
import pg from 'pg';
import { databaseUnavailable } from './unavailable.js';

export type Db = pg.Pool;
/** Anything that runs a query: the pool or a client inside a transaction. */
export type Queryable = Pick<pg.Pool, 'query'> | pg.PoolClient;

// Timestamps come back as Date (the default); bigint counts as numbers, since no count here
// comes near 2^53.
pg.types.setTypeParser(pg.types.builtins.INT8, (v) => Number(v));

/**
 * How long any wait on the database may last. Without them a Postgres that stops
 * answering (frozen, or a network that drops packets) holds every request that touches
 * it for as long as the client waits, since a connected socket that nothing answers
 * never errors by itself.
 */
export interface DatabaseTimeouts {
  /** Opening a connection, and waiting for a free one of a busy pool (pg-pool uses one bound for both). */
  connectMs: number;
  /**
   * One statement. The server cancels it at this (statement_timeout: the work stops and
   * the connection stays usable); the client gives up QUERY_TIMEOUT_GRACE_MS later
   * (query_timeout), which is what ends the wait when the server cannot answer at all.
   */
  queryMs: number;
}

/**
 * Ten seconds each: far above any statement the service runs (a few ms; the longest, row
 * and advisory lock waits behind another short transaction), and short enough that a
 * request to a frozen database answers 503 instead of hanging until its client gives up.
 * Nothing waits in a statement for long: pool acquires wait in memory, LISTEN holds its
 * own connection with no statement running, and migrations use their own connections.
 */
export const DEFAULT_DATABASE_TIMEOUTS: DatabaseTimeouts = { connectMs: 10_000, queryMs: 10_000 };

/** The client's bound trails the server's, so a live server's cancel arrives first and its connection is kept. */
export const QUERY_TIMEOUT_GRACE_MS = 1000;

/** Client options carrying the timeouts, for the pool and for the connections made outside it (the event hub's). */
export function timeoutOptions(timeouts: DatabaseTimeouts): Pick<pg.ClientConfig, 'connectionTimeoutMillis' | 'query_timeout' | 'statement_timeout'> {
  return {
    connectionTimeoutMillis: timeouts.connectMs,
    statement_timeout: timeouts.queryMs,
    query_timeout: timeouts.queryMs + QUERY_TIMEOUT_GRACE_MS,
  };
}

export function createPool(connectionString: string, max: number, timeouts: DatabaseTimeouts): Db {
  const pool = new pg.Pool({
    connectionString,
    max,
    idleTimeoutMillis: 30_000,
    ...timeoutOptions(timeouts),
    application_name: 'browserplane',
  });
  // pg-pool listens for errors only on idle clients. A checked-out client whose server goes
  // away (Postgres restarted, or killed) between two queries of its holder, as in a
  // transaction waiting on a browser, emits 'error' with nobody listening, and an
  // unhandled 'error' event ends the process. The failure is not lost without this
  // listener's help: the holder's next query rejects ("not queryable"), and release
  // discards the client instead of pooling it.
  pool.on('connect', (client) => client.on('error', () => undefined));
  return pool;
}

const statementNames = new Map<string, string>();

/**
 * A statement to run prepared: Postgres parses and plans it once per connection, and each
 * later run sends only its values (a hot path's parse and plan, per request, cost the
 * server about as much as running it). Named by a hash of its text, so two texts never
 * share a name, and an edited statement is prepared afresh. For statements run on every
 * request only: each name holds a prepared statement on every pooled connection.
 */
export function prepared(text: string, values: unknown[]): pg.QueryConfig {
  let name = statementNames.get(text);
  if (name === undefined) {
    name = `bp_${createHash('sha256').update(text).digest('base64url').slice(0, 22)}`;
    statementNames.set(text, name);
  }
  return { name, text, values };
}

/** Runs `work` in one transaction; rolls back on any error and rethrows it. */
export async function inTransaction<T>(db: Db, work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await db.connect();
  let result: T;
  try {
    await client.query('BEGIN');
    result = await work(client);
    await client.query('COMMIT');
  } catch (error) {
    // A statement the client gave up on (query_timeout) is still in flight on this
    // connection, and one that broke cannot take a ROLLBACK: either way the connection
    // is discarded, not pooled (the server rolls back when it sees it close), and no
    // ROLLBACK is queued behind a server that does not answer.
    if (databaseUnavailable(error)) {
      client.release(error instanceof Error ? error : true);
    } else {
      const rolledBack = await client.query('ROLLBACK').then(
        () => true,
        () => false,
      );
      client.release(rolledBack ? undefined : true);
    }
    throw error;
  }
  client.release();
  return result;
}

/** Postgres error code of a failed query, if it is one. */
export function pgErrorCode(error: unknown): string | undefined {
  if (typeof error === 'object' && error !== null && 'code' in error && typeof error.code === 'string') {
    return error.code;
  }
  return undefined;
}

export const UNIQUE_VIOLATION = '23505';
export const FOREIGN_KEY_VIOLATION = '23503';

/**
 * Runs a write and turns a unique violation into `conflict()`'s error: the database is
 * the judge of uniqueness (no check-then-insert race), the caller names the conflict.
 */
export async function onUniqueViolation<T>(write: () => Promise<T>, conflict: () => Error): Promise<T> {
  try {
    return await write();
  } catch (error) {
    if (pgErrorCode(error) === UNIQUE_VIOLATION) throw conflict();
    throw error;
  }
}
