/** The proxies module's facade: its module descriptor (routes, project resources) and its service. */
export { proxiesModule } from './module.js';
export * from './service.js';
