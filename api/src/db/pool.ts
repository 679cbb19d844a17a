import pg from 'pg';

export type Db = pg.Pool;
/** Anything that runs a query: the pool or a client inside a transaction. */
export type Queryable = Pick<pg.Pool, 'query'> | pg.PoolClient;

// Timestamps come back as Date (the default); bigint counts as numbers, since no count here
// comes near 2^53.
pg.types.setTypeParser(pg.types.builtins.INT8, (v) => Number(v));

export function createPool(connectionString: string, max: number): Db {
  const pool = new pg.Pool({
    connectionString,
    max,
    idleTimeoutMillis: 30_000,
    connectionTimeoutMillis: 10_000,
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

/** Runs `work` in one transaction; rolls back on any error and rethrows it. */
export async function inTransaction<T>(db: Db, work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await db.connect();
  try {
    await client.query('BEGIN');
    const result = await work(client);
    await client.query('COMMIT');
    return result;
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  } finally {
    client.release();
  }
}

/** Postgres error code of a failed query, if it is one. */
export function pgErrorCode(error: unknown): string | undefined {
  if (typeof error === 'object' && error !== null && 'code' in error && typeof error.code === 'string') {
    return error.code;
  }
  return undefined;
}

export const UNIQUE_VIOLATION = '23505';

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
