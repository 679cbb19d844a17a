import type { ApiModule } from '../api-module.js';
import { replayRoutes } from './routes.js';
import { replaySideDoorRoutes } from './side-door.js';
import { replayViewRoutes } from './view.js';

/** Session recordings (docs/replays.md): the public routes, the view page and the agent's side door. */
export const replaysModule: ApiModule = {
  name: 'replays',
  routes: (deps) => [...replayRoutes(deps), ...replayViewRoutes(deps), ...replaySideDoorRoutes(deps)],
};
