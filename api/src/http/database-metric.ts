import client from 'prom-client';
import type { Db } from '../db/pool.js';

/** How long a scrape waits for Postgres to answer before it counts as unreachable. */
export const DATABASE_PROBE_MS = 2000;

/**
 * browserplane_database_up: 1 when Postgres answered `SELECT 1` within DATABASE_PROBE_MS at
 * this scrape, else 0 (the chart's BrowserplaneDatabaseUnreachable alert). Asked at scrape
 * time, so it says what a request would find now, not what the last request found.
 */
export function registerDatabaseUp(registry: client.Registry, db: Db): void {
  new client.Gauge({
    name: 'browserplane_database_up',
    help: `Whether Postgres answered a trivial query within ${DATABASE_PROBE_MS / 1000} s at this scrape (1) or not (0)`,
    registers: [registry],
    async collect() {
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error('no answer')), DATABASE_PROBE_MS)));
      try {
        await Promise.race([db.query('SELECT 1'), timeout]);
        this.set(1);
      } catch {
        this.set(0);
      } finally {
        clearTimeout(timer);
      }
    },
  });
}
