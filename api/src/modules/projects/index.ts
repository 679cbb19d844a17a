/** Projects' facade. */
export { findDefaultProject, findProject, type ProjectRow } from './store.js';
export { projectRoutes } from './routes.js';
