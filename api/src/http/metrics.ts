import type { RequestHandler } from 'express';
import client from 'prom-client';
import { collectDefaultMetrics } from '../../../lib/default-metrics.js';
import type { Db } from '../db/pool.js';
import { registerDatabaseUp } from './database-metric.js';

/** One registry per app instance: no global state, so tests can build many apps. */
export interface HttpMetrics {
  registry: client.Registry;
  middleware: RequestHandler;
}

export function createMetrics(db: Db): HttpMetrics {
  const registry = new client.Registry();
  collectDefaultMetrics(registry);

  const requests = new client.Counter({
    name: 'browserplane_http_requests_total',
    help: 'HTTP requests by route template, method and status',
    labelNames: ['method', 'route', 'status'] as const,
    registers: [registry],
  });
  const duration = new client.Histogram({
    name: 'browserplane_http_request_duration_seconds',
    help: 'HTTP request latency by route template and method',
    labelNames: ['method', 'route'] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
    registers: [registry],
  });
  const poolGauge = (name: string, help: string, read: () => number) =>
    new client.Gauge({
      name,
      help,
      registers: [registry],
      collect() {
        this.set(read());
      },
    });
  poolGauge('browserplane_db_pool_connections', 'Postgres connections open in the pool', () => db.totalCount);
  poolGauge('browserplane_db_pool_idle_connections', 'Idle Postgres connections in the pool', () => db.idleCount);
  poolGauge('browserplane_db_pool_waiting_clients', 'Queries waiting for a pool connection', () => db.waitingCount);
  registerDatabaseUp(registry, db);

  const middleware: RequestHandler = (req, res, next) => {
    const end = duration.startTimer();
    res.on('finish', () => {
      // The route template, never the raw path: ids in paths would explode cardinality.
      const route = typeof res.locals.routeTemplate === 'string' ? res.locals.routeTemplate : 'unmatched';
      const labels = { method: req.method, route };
      end(labels);
      requests.inc({ ...labels, status: String(res.statusCode) });
    });
    next();
  };
  return { registry, middleware };
}
