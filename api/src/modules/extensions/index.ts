/** The extensions module's facade: what browsers (create with extensions) and the composition use. */
export { extensionConfigFields, extensionSettingsOf, MAX_EXTENSIONS_PER_BROWSER, type ExtensionSettings } from './settings.js';
export { extensionSettings } from './service.js';
export { findExtension, markExtensionsUsed, readExtensionArchive, type ExtensionRow } from './store.js';
