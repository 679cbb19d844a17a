import type { ApiModule } from '../registry.js';

export const proxiesModule: ApiModule = { name: 'proxies', routes: () => [] };
