/** Managed auth's facade: what other packages (the operator's AuthConnection reconciler) may use. */
export { authConnectionsModule } from './module.js';
export { changeConnection, connectionChannel, createConnection, removeConnection, resolveProxyRef } from './service.js';
export { findManagedConnection, listConnections, type ConnectionRow } from './store.js';
export { judgeReauth } from './reauth.js';
export * from './schema.js';
