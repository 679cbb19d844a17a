import type { ApiModule } from '../api-module.js';
import { replayRoutes } from './routes.js';
import { replaySideDoorRoutes } from './side-door.js';

/** Session recordings (docs/replays.md): the public routes and the agent's side door. */
export const replaysModule: ApiModule = {
  name: 'replays',
  routes: (deps) => [...replayRoutes(deps), ...replaySideDoorRoutes(deps)],
};
