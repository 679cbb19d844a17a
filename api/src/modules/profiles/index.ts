/** The profiles module's facade: its module descriptor (routes, project resources) and its service. */
export { profilesModule } from './module.js';
export * from './service.js';
