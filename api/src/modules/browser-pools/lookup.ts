import type { Queryable } from '../../db/pool.js';
import { notFound } from '../../http/errors.js';
import type { ProjectScope } from '../../scope.js';
import { findPool, type PoolRow } from './store.js';

/** A live pool of the project by id or name, else 404. */
export async function getPool(db: Queryable, scope: ProjectScope, idOrName: string): Promise<PoolRow> {
  const row = await findPool(db, scope, idOrName);
  if (!row) throw notFound('Browser pool', idOrName);
  return row;
}
