import type { ApiModule } from '../api-module.js';
import { registerBrowserMetrics } from './metrics.js';
import { browserRoutes } from './routes.js';
import { countProjectSessions } from './service.js';

/**
 * Routes read the runtime from `deps.runtime` at each request (503
 * browser_runtime_unavailable until the composition root wires one). The CDP WebSocket
 * (attachCdpProxy) and the idle reaper (IdleReaper) are started by the composition root.
 */
export const browsersModule: ApiModule = {
  name: 'browsers',
  routes: (deps, services) => browserRoutes(deps, services),
  projectResources: [countProjectSessions],
  metrics: (registry, deps) => registerBrowserMetrics(registry, deps.db),
};

export { attachCdpProxy, CdpConnections, type CdpProxy } from './cdp-proxy.js';
export { IdleReaper } from './reaper.js';
export { adoptBrowsersAtStart, type AdoptionReport } from './adopt.js';
