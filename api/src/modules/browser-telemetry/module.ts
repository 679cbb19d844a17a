import type { ApiModule } from '../api-module.js';
import { telemetryIngestRoutes } from './ingest-routes.js';
import { telemetryRoutes } from './routes.js';

/** Browser telemetry (docs/telemetry.md): the agent's side door, the list and the stream. */
export const browserTelemetryModule: ApiModule = {
  name: 'browser-telemetry',
  routes: (deps) => [...telemetryRoutes(deps), ...telemetryIngestRoutes(deps)],
};
