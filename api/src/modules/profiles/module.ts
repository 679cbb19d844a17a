import type { ApiModule } from '../registry.js';

export const profilesModule: ApiModule = { name: 'profiles', routes: () => [] };
