import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { inject } from 'vitest';
import { createPool, type Db } from '../../api/src/db/pool.js';

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
  const db = createPool(url.toString(), 5);
  return {
    url: url.toString(),
    db,
    async drop() {
      // A test may have ended the pool itself (to provoke database failures).
      if (!db.ended) await db.end();
      const again = new pg.Client({ connectionString: adminUrl });
      await again.connect();
      try {
        await again.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await again.end();
      }
    },
  };
}
