import type { ApiModule } from '../api-module.js';
import { credentialProviderRoutes } from './routes.js';

/** Org-wide: nothing of it lives in a project, so it counts toward no project's resources. */
export const credentialProvidersModule: ApiModule = {
  name: 'credential-providers',
  routes: credentialProviderRoutes,
};
