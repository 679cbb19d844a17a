import type { ApiModule } from '../api-module.js';
import { proxyRoutes } from './routes.js';
import { countProjectProxies } from './service.js';

export const proxiesModule: ApiModule = { name: 'proxies', routes: proxyRoutes, projectResources: [countProjectProxies] };
