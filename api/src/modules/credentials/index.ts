/** The credentials module's facade: its module descriptor (routes, project resources) and its service. */
export { credentialsModule } from './module.js';
export * from './service.js';
