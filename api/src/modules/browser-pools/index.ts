/** Browser pools' facade: what other packages (the operator's GitOps reconciler) may use. */
export { browserPoolsModule } from './module.js';
export { PoolManager } from './manager.js';
export { createPool, deletePool, drainPool, updatePoolSettings, type PoolServiceDeps, type PoolWriter } from './service.js';
export { findManagedPool, findPool, type PoolRow } from './store.js';
export * from './schema.js';
