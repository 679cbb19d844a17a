import type { Clock } from '../clock.js';
import type { Queryable } from '../db/pool.js';
import { hashApiKey } from '../modules/api-keys/key-material.js';
import { findApiKeyForRequest } from '../modules/api-keys/store.js';
import { findDefaultProject, findProject, type ProjectRow } from '../modules/projects/store.js';
import type { AuthContext } from './auth-context.js';
import { AppError, forbidden, unauthorized } from './errors.js';
import type { AuthScope } from './route.js';

export const PROJECT_HEADER = 'x-kernel-project-id';

/**
 * Resolves the caller from `Authorization: Bearer <key>` and the project the request
 * acts in: a project-scoped key's own project; for an org-wide key the project named by
 * `X-Kernel-Project-Id` (id or name), else the org's default project.
 */
export async function authenticate(
  db: Queryable,
  clock: Clock,
  headers: { authorization?: string | undefined; projectHeader?: string | undefined },
  scope: Exclude<AuthScope, 'public'>,
): Promise<AuthContext> {
  const match = /^Bearer +([\x21-\x7e]+) *$/i.exec(headers.authorization ?? '');
  if (!match?.[1]) {
    throw unauthorized('Send your API key as "Authorization: Bearer <key>"');
  }
  const key = await findApiKeyForRequest(db, hashApiKey(match[1]));
  if (!key || key.deleted_at) throw unauthorized('The API key is not valid');
  if (key.expires_at && key.expires_at.getTime() <= clock.now().getTime()) {
    throw unauthorized('The API key has expired');
  }
  const apiKey = { id: key.id, name: key.name, projectId: key.project_id };
  if (scope === 'org') {
    if (key.project_id) throw forbidden('org_key_required', 'This operation needs an org-wide API key; this key is scoped to one project');
    return { orgId: key.org_id, apiKey, project: null };
  }
  const named = headers.projectHeader?.trim() || undefined;
  // The common case (no project named) needs no second query.
  const project =
    named === undefined && key.implicit_project_id !== null && key.implicit_project_name !== null
      ? { id: key.implicit_project_id, name: key.implicit_project_name }
      : await resolveProject(db, key.org_id, key.project_id, named);
  return { orgId: key.org_id, apiKey, project: { id: project.id, name: project.name } };
}

async function resolveProject(
  db: Queryable,
  orgId: string,
  keyProjectId: string | null,
  named: string | undefined,
): Promise<ProjectRow> {
  if (keyProjectId) {
    const own = await findProject(db, orgId, keyProjectId);
    if (!own) throw unauthorized('The API key is not valid');
    if (named !== undefined) {
      const asked = await findProject(db, orgId, named);
      if (asked?.id !== own.id) {
        throw forbidden('project_forbidden', 'This API key is scoped to another project than the one in X-Kernel-Project-Id');
      }
    }
    return own;
  }
  if (named !== undefined) {
    const asked = await findProject(db, orgId, named);
    if (!asked) throw new AppError(404, 'project_not_found', `Project ${JSON.stringify(named)} named in X-Kernel-Project-Id was not found`);
    return asked;
  }
  const fallback = await findDefaultProject(db, orgId);
  if (!fallback) {
    throw new AppError(404, 'project_not_found', 'The organisation has no default project; name one in X-Kernel-Project-Id');
  }
  return fallback;
}
