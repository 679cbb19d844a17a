import { createHash } from 'node:crypto';
import type { AppDeps } from '../../app-deps.js';
import { FOREIGN_KEY_VIOLATION, inTransaction, pgErrorCode, UNIQUE_VIOLATION, type Queryable } from '../../db/pool.js';
import { AppError, badRequest, conflict, notFound } from '../../http/errors.js';
import { ExtensionZipError, inspectExtensionZip, type ExtensionZipPlan } from '../../../../lib/extension-zip.js';
import { DEFAULT_EXTENSION_SETTINGS, type ExtensionSettings } from './settings.js';
import {
  countProjectExtensions,
  deleteExtension,
  findExtension,
  insertExtension,
  lockProjectExtensionCreates,
  poolsUsingExtension,
  type ExtensionRow,
  type ProjectScope,
} from './store.js';

export const extensionSettings = (deps: Pick<AppDeps, 'settings'>): ExtensionSettings => deps.settings.extensions ?? DEFAULT_EXTENSION_SETTINGS;

/** The zip checked as an extension, or a 400/413 that says what is wrong with it. */
export async function checkExtensionZip(settings: ExtensionSettings, zip: Buffer, field = 'file'): Promise<ExtensionZipPlan> {
  if (zip.length > settings.maxZipBytes) throw new AppError(413, 'extension_too_large', `The zip is larger than ${settings.maxZipBytes} bytes`);
  try {
    return await inspectExtensionZip(zip, { maxUnpackedBytes: settings.maxUnpackedBytes, maxEntries: settings.maxEntries });
  } catch (error) {
    if (!(error instanceof ExtensionZipError)) throw error;
    const details = [{ code: error.reason, message: error.message, field }];
    if (error.reason === 'too_large') throw new AppError(413, 'extension_too_large', `The extension was refused: ${error.message}`, { details });
    throw badRequest('invalid_extension', `The extension was refused: ${error.message}`, details);
  }
}

export async function getExtension(db: Queryable, scope: ProjectScope, idOrName: string): Promise<ExtensionRow> {
  const row = await findExtension(db, scope, idOrName);
  if (!row) throw notFound('Extension', idOrName);
  return row;
}

/** Stores a checked zip; the project's count limit and the name's uniqueness are enforced under one lock. */
export async function createExtension(deps: AppDeps, scope: ProjectScope, input: { name: string | null; zip: Buffer }): Promise<ExtensionRow> {
  const settings = extensionSettings(deps);
  const plan = await checkExtensionZip(settings, input.zip);
  try {
    return await inTransaction(deps.db, async (tx) => {
      await lockProjectExtensionCreates(tx, scope.projectId);
      const count = await countProjectExtensions(tx, scope.projectId);
      if (count >= settings.maxPerProject) {
        throw conflict('extension_limit_reached', `The project holds ${count} extensions, the most it may (BROWSERPLANE_EXTENSION_MAX_PER_PROJECT); delete one first`);
      }
      return insertExtension(tx, scope, {
        name: input.name,
        archive: input.zip,
        checksum: createHash('sha256').update(input.zip).digest('hex'),
        manifestName: plan.manifest.name,
        manifestVersion: plan.manifest.version,
        now: deps.clock.now(),
      });
    });
  } catch (error) {
    if (pgErrorCode(error) === UNIQUE_VIOLATION) throw conflict('extension_name_taken', `An extension named ${JSON.stringify(input.name)} already exists in this project`);
    throw error;
  }
}

/**
 * Deletes an extension no browser pool loads. One a pool loads is refused with 409 naming
 * the pools (change their extensions first): the pool would otherwise warm browsers
 * without it, or with a copy the user believes gone. The foreign key of
 * browser_pool_extensions holds this against a pool changed at the same moment.
 */
export async function removeExtension(deps: AppDeps, scope: ProjectScope, idOrName: string): Promise<void> {
  const row = await getExtension(deps.db, scope, idOrName);
  let deleted: boolean;
  try {
    deleted = await deleteExtension(deps.db, scope, row.id);
  } catch (error) {
    if (pgErrorCode(error) === FOREIGN_KEY_VIOLATION) throw inUse(idOrName, await poolsUsingExtension(deps.db, row.id));
    throw error;
  }
  if (!deleted) throw notFound('Extension', idOrName);
}

function inUse(idOrName: string, pools: { id: string; name: string | null }[]): AppError {
  const names = pools.map((pool) => (pool.name === null ? pool.id : `${pool.name} (${pool.id})`));
  return conflict(
    'extension_in_use',
    `The extension ${JSON.stringify(idOrName)} is loaded by the browser pools ${names.join(', ')}; remove it from their extensions (PATCH /browser_pools/{id}) first`,
    pools.map((pool) => ({ code: 'browser_pool', message: pool.name === null ? pool.id : `${pool.name} (${pool.id})` })),
  );
}

export function presentExtension(row: ExtensionRow) {
  return {
    id: row.id,
    name: row.name,
    created_at: row.created_at.toISOString(),
    last_used_at: row.last_used_at?.toISOString() ?? null,
    size_bytes: Number(row.size_bytes),
    checksum: row.checksum,
  };
}

/** Extensions count toward "the project is not empty". */
export async function countProjectExtensionsResource(db: Queryable, projectId: string): Promise<{ kind: string; count: number }> {
  return { kind: 'extensions', count: await countProjectExtensions(db, projectId) };
}
