/**
 * The credential-providers module's facade for other modules: what managed auth asks of a
 * provider. The registry takes the module descriptor from module.ts, as it does every
 * module's, so that this facade does not lead back to the app's services.
 */
export { ProviderLoginError, resolveProviderSecrets, type ProviderRef } from './lookup.js';
export { getProvider } from './service.js';
