/**
 * Where the agent and what starts it (the embedded runtime, the browser pod) agree on
 * paths inside the browser's filesystem.
 */

/** Where Chromium reads managed policy; the agent writes a session's chrome_policy there. */
export const MANAGED_POLICY_DIR = '/etc/chromium/policies/managed';
