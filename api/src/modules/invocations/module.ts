import type { ApiModule } from '../registry.js';
import { invocationRoutes } from './routes.js';
import { countProjectInvocations } from './service.js';

export const invocationsModule: ApiModule = {
  name: 'invocations',
  routes: (deps) => invocationRoutes(deps),
  projectResources: [countProjectInvocations],
};
