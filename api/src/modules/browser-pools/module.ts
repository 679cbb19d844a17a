import type { ApiModule } from '../api-module.js';
import { browserPoolRoutes } from './routes.js';
import { countProjectPools } from './service.js';

/** Browser pools: configuration and size (this slice); warming and leases come next. */
export const browserPoolsModule: ApiModule = {
  name: 'browser-pools',
  routes: browserPoolRoutes,
  projectResources: [countProjectPools],
};
