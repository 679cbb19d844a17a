import type { ApiModule } from '../registry.js';

export const credentialsModule: ApiModule = { name: 'credentials', routes: () => [] };
