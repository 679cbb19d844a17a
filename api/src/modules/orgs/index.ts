/** Orgs' facade. */
export { firstOrg, type OrgRow } from './store.js';
export { bootstrap, ADMIN_KEY_FILE } from './bootstrap.js';
