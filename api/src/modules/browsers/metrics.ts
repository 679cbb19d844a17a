import client from 'prom-client';
import type { Queryable } from '../../db/pool.js';

/**
 * Session gauges read from Postgres at scrape time, not counted in memory: Postgres is
 * where sessions live, so every replica reports the same figures (aggregate them with
 * max, not sum). Ended sessions are a counter instead, counted where they end
 * (session-ends.ts), so N replicas do not count the same rows N times.
 */
export function registerBrowserMetrics(registry: client.Registry, db: Queryable): void {
  new client.Gauge({
    name: 'browserplane_browser_sessions',
    help: 'Active browser sessions by phase (starting, running), all projects',
    labelNames: ['phase'] as const,
    registers: [registry],
    async collect() {
      const { rows } = await db.query<{ phase: string; n: string }>(
        'SELECT phase, count(*) AS n FROM browser_sessions WHERE deleted_at IS NULL AND spare_key IS NULL GROUP BY phase',
      );
      this.reset();
      for (const phase of ['starting', 'running']) this.set({ phase }, Number(rows.find((r) => r.phase === phase)?.n ?? 0));
    },
  });
  new client.Gauge({
    name: 'browserplane_pool_browsers',
    help: 'Browsers of each live pool by state (starting, idle, leased); the same on every replica (aggregate with max)',
    labelNames: ['pool', 'state'] as const,
    registers: [registry],
    async collect() {
      const { rows } = await db.query<{ pool: string; state: string; n: string }>(
        `SELECT p.id AS pool, st.state, count(s.id) AS n
           FROM browser_pools p
           CROSS JOIN (VALUES ('starting'), ('idle'), ('leased')) AS st(state)
           LEFT JOIN browser_sessions s ON s.pool_id = p.id AND s.deleted_at IS NULL
             AND st.state = CASE WHEN s.phase = 'starting' THEN 'starting' WHEN s.leased_at IS NULL THEN 'idle' ELSE 'leased' END
          WHERE p.deleted_at IS NULL
          GROUP BY p.id, st.state`,
      );
      this.reset();
      for (const row of rows) this.set({ pool: row.pool, state: row.state }, Number(row.n));
    },
  });
  new client.Gauge({
    name: 'browserplane_spare_browsers',
    help: 'Warm spare browsers waiting for a create, by phase (starting, running), all projects',
    labelNames: ['phase'] as const,
    registers: [registry],
    async collect() {
      const { rows } = await db.query<{ phase: string; n: string }>(
        'SELECT phase, count(*) AS n FROM browser_sessions WHERE deleted_at IS NULL AND spare_key IS NOT NULL GROUP BY phase',
      );
      this.reset();
      for (const phase of ['starting', 'running']) this.set({ phase }, Number(rows.find((r) => r.phase === phase)?.n ?? 0));
    },
  });
}
