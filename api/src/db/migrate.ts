import path from 'node:path';
import { runner } from 'node-pg-migrate';
import type { Logger } from 'pino';
import { migrateJobQueue } from '../jobs/queue.js';
import { packageRoot } from '../paths.js';

export const MIGRATIONS_DIR = path.join(packageRoot(), 'api', 'migrations');

/**
 * Applies every pending migration. node-pg-migrate holds an advisory lock while it
 * runs, so API replicas starting together apply each migration once; graphile-worker's
 * migrations lock the same way.
 */
export async function migrate(databaseUrl: string, log: Logger): Promise<string[]> {
  const applied = await runner({
    databaseUrl,
    dir: MIGRATIONS_DIR,
    direction: 'up',
    migrationsTable: 'pgmigrations',
    count: Infinity,
    singleTransaction: true,
    checkOrder: true,
    log: (message: string) => log.debug({ component: 'migrate' }, message),
  });
  const names = applied.map((m) => m.name);
  // The job queue's own schema (graphile_worker), versioned by the library.
  await migrateJobQueue(databaseUrl, log);
  log.info({ component: 'migrate', applied: names }, names.length ? 'migrations applied' : 'schema up to date');
  return names;
}
