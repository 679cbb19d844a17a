import type { ProjectResourceCounter } from '../app-deps.js';
import type { ApiModule } from './api-module.js';
import { apiKeyRoutes } from './api-keys/routes.js';
import { appsModule } from './apps/module.js';
import { auditLogsModule } from './audit-logs/module.js';
import { authConnectionsModule } from './auth-connections/module.js';
import { countProjectApiKeys } from './api-keys/service.js';
import { browserPoolsModule } from './browser-pools/module.js';
import { browsersModule } from './browsers/module.js';
import { logsRoutes } from './browsers/logs-routes.js';
import { browserTelemetryModule } from './browser-telemetry/module.js';
import { credentialProvidersModule } from './credential-providers/module.js';
import { credentialsModule } from './credentials/module.js';
import { extensionsModule } from './extensions/module.js';
import { homeRoutes } from './home/routes.js';
import { invocationsModule } from './invocations/module.js';
import { profilesModule } from './profiles/module.js';
import { projectRoutes } from './projects/routes.js';
import { proxiesModule } from './proxies/module.js';
import { replaysModule } from './replays/module.js';

/**
 * Every resource module: its routes and what it counts toward "the project is not empty".
 * The one place a new module is added.
 */
export const apiModules: ApiModule[] = [
  { name: 'api-keys', routes: apiKeyRoutes, projectResources: [countProjectApiKeys] },
  { name: 'projects', routes: projectRoutes },
  invocationsModule,
  proxiesModule,
  credentialsModule,
  profilesModule,
  browsersModule,
  { name: 'browser-logs', routes: (deps) => logsRoutes(deps) },
  browserPoolsModule,
  authConnectionsModule,
  appsModule,
  replaysModule,
  auditLogsModule,
  browserTelemetryModule,
  credentialProvidersModule,
  extensionsModule,
  { name: 'home', routes: () => homeRoutes() },
];

export const allProjectResources = (): ProjectResourceCounter[] => apiModules.flatMap((m) => m.projectResources ?? []);
