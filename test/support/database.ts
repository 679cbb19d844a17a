import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { inject } from 'vitest';
import { createPool, DEFAULT_DATABASE_TIMEOUTS, type Db } from '../../api/src/db/pool.js';

const TEMPLATE_DB = 'browserplane_template';

export interface TestDatabase {
  url: string;
  db: Db;
  drop(): Promise<void>;
}

/** A migrated database of its own for one test file, cloned from the template in milliseconds. */
export async function freshDatabase(): Promise<TestDatabase> {
  const adminUrl = inject('pgAdminUrl');
  const name = `bp_test_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name} TEMPLATE ${TEMPLATE_DB}`);
  } finally {
    await admin.end();
  }
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  const db = createPool(url.toString(), 5, DEFAULT_DATABASE_TIMEOUTS);
  return {
    url: url.toString(),
    db,
    async drop() {
      // A test may have ended the pool itself (to provoke database failures). From here on
      // an idle client's error is the teardown's own doing, not the test's.
      db.on('error', () => undefined);
      if (!db.ended) await db.end();
      const again = new pg.Client({ connectionString: adminUrl });
      await again.connect();
      try {
        // pool.end() resolves before its clients' sockets have closed. Terminating a client
        // that is still closing makes it raise an error nobody listens for any more (an
        // uncaught exception in whichever test file runs next), so wait for them first;
        // FORCE is only the backstop for connections a test left open.
        const deadline = Date.now() + 5_000;
        while (Date.now() < deadline) {
          const { rows } = await again.query<{ n: number }>('SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1', [name]);
          if (rows[0]!.n === 0) break;
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
        await again.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await again.end();
      }
    },
  };
}
