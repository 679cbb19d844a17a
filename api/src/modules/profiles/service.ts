import { Readable } from 'node:stream';
import type { AppDeps, ProjectResourceCounter } from '../../app-deps.js';
import { inTransaction, onUniqueViolation } from '../../db/pool.js';
import { conflict, notFound } from '../../http/errors.js';
import type { ProfileRef } from '../../ports/profile-store.js';
import { shareLockLiveProject } from '../projects/store.js';
import {
  countLiveProjectProfiles,
  findProfile,
  insertProfile,
  renameProfile,
  softDeleteProfile,
  type ProfileRow,
  type ProjectScope,
} from './store.js';

type Deps = Pick<AppDeps, 'db' | 'clock' | 'log' | 'profileStore'>;

export function presentProfile(row: ProfileRow) {
  return {
    id: row.id,
    name: row.name,
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
    // The SDK types last_used_at as an optional string, not a nullable one.
    ...(row.last_used_at ? { last_used_at: row.last_used_at.toISOString() } : {}),
  };
}

export const refOf = (row: ProfileRow): ProfileRef => ({ orgId: row.org_id, projectId: row.project_id, profileId: row.id });

function uniqueName<T>(name: string | null, write: () => Promise<T>): Promise<T> {
  return name === null
    ? write()
    : onUniqueViolation(write, () =>
        conflict('profile_name_taken', `A profile named ${JSON.stringify(name)} already exists in this project`),
      );
}

/**
 * Creates a profile with no stored data. The share lock on the project makes a concurrent
 * project delete (which counts profiles under FOR UPDATE) wait and see the new profile.
 * `projectName` names the project in that 404 (its id when not given).
 */
export async function createProfile(
  deps: Deps,
  scope: ProjectScope,
  name: string | null,
  projectName = scope.projectId,
): Promise<ProfileRow> {
  return uniqueName(name, () =>
    inTransaction(deps.db, async (tx) => {
      const project = await shareLockLiveProject(tx, scope.orgId, scope.projectId);
      if (project?.id !== scope.projectId) throw notFound('Project', projectName);
      return insertProfile(tx, scope, { name, now: deps.clock.now() });
    }),
  );
}

export async function getProfile(deps: Pick<Deps, 'db'>, scope: ProjectScope, idOrName: string): Promise<ProfileRow> {
  const row = await findProfile(deps.db, scope, idOrName);
  if (!row) throw notFound('Profile', idOrName);
  return row;
}

export async function changeProfileName(deps: Deps, scope: ProjectScope, idOrName: string, name: string): Promise<ProfileRow> {
  const row = await getProfile(deps, scope, idOrName);
  const updated = await uniqueName(name, () => renameProfile(deps.db, scope, row.id, { name, now: deps.clock.now() }));
  if (!updated) throw notFound('Profile', idOrName);
  return updated;
}

/**
 * Soft-deletes the row, then removes the stored files. In that order, a failure in between
 * leaves unreachable files (logged) rather than a live profile whose data is gone.
 */
export async function deleteProfile(deps: Deps, scope: ProjectScope, idOrName: string): Promise<void> {
  const row = await getProfile(deps, scope, idOrName);
  if (!(await softDeleteProfile(deps.db, scope, row.id, deps.clock.now()))) throw notFound('Profile', idOrName);
  try {
    await deps.profileStore.delete(refOf(row));
  } catch (error) {
    deps.log.error({ err: error, profileId: row.id }, 'profile deleted, but removing its stored files failed');
  }
}

/** Two zero blocks: the end-of-archive marker, i.e. a tar with no entries. */
const EMPTY_TAR = Buffer.alloc(1024);

/**
 * The profile's files as a tar. A profile that no session has saved yet downloads as an
 * empty archive: it exists and holds nothing, and every client can unpack that.
 */
export async function profileTar(deps: Deps, row: ProfileRow): Promise<Readable> {
  const stored = await deps.profileStore.exportTar(refOf(row));
  return stored ?? Readable.from([EMPTY_TAR]);
}

/** Live profiles keep their project from being deleted: their files would be left unreachable. */
export const countProjectProfiles: ProjectResourceCounter = async (db, projectId) => ({
  kind: 'profiles',
  count: await countLiveProjectProfiles(db, projectId),
});
