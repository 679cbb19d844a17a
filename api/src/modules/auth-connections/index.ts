/** Managed auth's facade: what other packages (the operator's AuthConnection reconciler) may use. */
export { authConnectionsModule } from './module.js';
export { changeConnection, connectionChannel, createConnection, removeConnection, resolveProxyRef, type NamedProjectScope } from './service.js';
export { findManagedConnection, listConnections } from './store.js';
export type { ConnectionRow } from './rows.js';
export { judgeReauth } from './reauth.js';
export * from './schema.js';
