import type { Queryable } from '../../db/pool.js';
import type { Scope } from './store.js';

/**
 * The browsers an invocation owns: sessions created with its `invocation_id`. Browser
 * sessions arrive with the next issue; their table references
 * `invocations (project_id, id)`, so a browser can only belong to an invocation of its
 * own project, and the browsers module supplies this port. Until then no invocation
 * owns a browser.
 */
export interface InvocationBrowsers {
  /** Active (not deleted) sessions owned by the invocation, as BrowserSession objects. */
  listActive(db: Queryable, scope: Scope, invocationId: string): Promise<Array<{ session_id: string }>>;
  /** Deletes every session the invocation owns; idempotent. */
  deleteAll(scope: Scope, invocationId: string): Promise<void>;
}

export const noInvocationBrowsers: InvocationBrowsers = {
  listActive: () => Promise.resolve([]),
  deleteAll: () => Promise.resolve(),
};
