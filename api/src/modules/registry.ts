import type { Registry } from 'prom-client';
import type { AppDeps, ProjectResourceCounter } from '../app-deps.js';
import type { RouteDef } from '../http/route.js';
import { apiKeyRoutes } from './api-keys/routes.js';
import { authConnectionsModule } from './auth-connections/module.js';
import { countProjectApiKeys } from './api-keys/service.js';
import { browserPoolsModule } from './browser-pools/module.js';
import { browsersModule } from './browsers/module.js';
import { credentialsModule } from './credentials/module.js';
import { invocationsModule } from './invocations/module.js';
import { profilesModule } from './profiles/module.js';
import { projectRoutes } from './projects/routes.js';
import { proxiesModule } from './proxies/module.js';

/**
 * Every resource module: its routes and what it counts toward "the project is not empty".
 * The one place a new module is added.
 */
export interface ApiModule {
  name: string;
  routes(deps: AppDeps): RouteDef[];
  projectResources?: ProjectResourceCounter[];
  /** Registers the module's own metrics on the app's registry (served at /metrics). */
  metrics?(registry: Registry, deps: AppDeps): void;
}

export const apiModules: ApiModule[] = [
  { name: 'api-keys', routes: apiKeyRoutes, projectResources: [countProjectApiKeys] },
  { name: 'projects', routes: projectRoutes },
  invocationsModule,
  proxiesModule,
  credentialsModule,
  profilesModule,
  browsersModule,
  browserPoolsModule,
  authConnectionsModule,
];

export const allProjectResources = (): ProjectResourceCounter[] => apiModules.flatMap((m) => m.projectResources ?? []);
