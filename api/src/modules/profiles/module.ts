import type { ApiModule } from '../api-module.js';
import { profileRoutes } from './routes.js';
import { countProjectProfiles } from './service.js';

export const profilesModule: ApiModule = {
  name: 'profiles',
  routes: profileRoutes,
  projectResources: [countProjectProfiles],
};
