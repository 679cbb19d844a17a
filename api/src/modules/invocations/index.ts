/** The invocations module's facade: its module descriptor (routes, project resources) and its service. */
export { invocationsModule } from './module.js';
export * from './service.js';
