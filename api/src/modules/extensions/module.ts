import type { ApiModule } from '../api-module.js';
import { extensionRoutes } from './routes.js';
import { countProjectExtensionsResource } from './service.js';

export const extensionsModule: ApiModule = {
  name: 'extensions',
  routes: extensionRoutes,
  projectResources: [countProjectExtensionsResource],
};
