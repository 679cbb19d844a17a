import type { ApiModule } from '../api-module.js';
import { hostedPageRoutes } from './hosted/routes.js';
import { authConnectionRoutes } from './routes.js';
import { countProjectAuthConnections } from './service.js';

export const authConnectionsModule: ApiModule = {
  name: 'auth-connections',
  routes: (deps, services) => [...authConnectionRoutes(deps, services), ...hostedPageRoutes(deps)],
  projectResources: [countProjectAuthConnections],
};
