import type { ApiModule } from '../registry.js';

export const invocationsModule: ApiModule = { name: 'invocations', routes: () => [] };
