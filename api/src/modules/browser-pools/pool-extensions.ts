import type { AppDeps } from '../../app-deps.js';
import type { Queryable } from '../../db/pool.js';
import { notFound } from '../../http/errors.js';
import type { ExtensionTarget } from '../../../../contract/launch-spec.js';
import { resolveSessionExtensions } from '../browsers/extension-archive.js';
import { findExtension } from '../extensions/index.js';
import type { PoolRow, PoolScope } from './store.js';

/**
 * A pool's uploaded extensions: resolved to ids within the pool's project when the pool is
 * created or changed (an extension of another project is not found, 404), stored in load
 * order (browser_pool_extensions), and handed to each browser the fill warms through the
 * same side door a browser created with extensions uses (extension-archive.ts).
 */

type Selector = { id?: string | undefined; name?: string | undefined };

/** The selectors' extensions in the project, as ids in the order sent, each once; 404 naming the first missing one. */
export async function resolvePoolExtensionIds(db: Queryable, scope: PoolScope, selectors: Selector[]): Promise<string[]> {
  const ids: string[] = [];
  for (const selector of selectors) {
    const key = (selector.id ?? selector.name)!;
    const row = await findExtension(db, scope, key);
    if (!row) throw notFound('Extension', key);
    if (!ids.includes(row.id)) ids.push(row.id);
  }
  return ids;
}

/** Replaces the pool's extensions with `ids`, in that order. */
export async function setPoolExtensions(db: Queryable, poolId: string, ids: string[]): Promise<void> {
  await db.query('DELETE FROM browser_pool_extensions WHERE pool_id = $1', [poolId]);
  if (ids.length === 0) return;
  await db.query(
    `INSERT INTO browser_pool_extensions (pool_id, extension_id, position)
     SELECT $1, id, ord::int FROM unnest($2::text[]) WITH ORDINALITY AS t(id, ord)`,
    [poolId, ids],
  );
}

/** What a warm browser of the pool loads, with archive URLs signed for that browser. */
export async function poolExtensionTargets(deps: AppDeps, tx: Queryable, pool: PoolRow, sessionId: string): Promise<ExtensionTarget[]> {
  const selectors = pool.extension_ids.map((id) => ({ id }));
  return resolveSessionExtensions(deps, tx, { scope: { orgId: pool.org_id, projectId: pool.project_id }, sessionId, selectors });
}
