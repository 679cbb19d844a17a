import type { ApiModule } from '../api-module.js';
import { credentialRoutes } from './routes.js';
import { countProjectCredentials } from './service.js';

export const credentialsModule: ApiModule = {
  name: 'credentials',
  routes: credentialRoutes,
  projectResources: [countProjectCredentials],
};
