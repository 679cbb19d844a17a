import type { Clock } from '../clock.js';
import type { Queryable } from '../db/pool.js';
import type { AuthCache } from '../modules/api-keys/auth-cache.js';
import { hashApiKey } from '../modules/api-keys/key-material.js';
import { findApiKeyForRequest } from '../modules/api-keys/store.js';
import { findDefaultProject, findProject, type ProjectRow } from '../modules/projects/store.js';
import type { AuthContext } from './auth-context.js';
import type { IdentifiedKey } from './call-audit.js';
import { AppError, badRequest, forbidden, unauthorized } from './errors.js';
import type { AuthScope } from './route.js';

export const PROJECT_HEADER = 'x-kernel-project-id';
/** What newer clients send (Python SDK `Kernel(project=…)`, the CLI's --project): a name or an id. */
export const PROJECT_NAME_HEADER = 'x-kernel-project';

export interface AuthHeaders {
  authorization?: string | undefined;
  /** X-Kernel-Project-Id. */
  projectHeader?: string | undefined;
  /** X-Kernel-Project. */
  projectNameHeader?: string | undefined;
}

/**
 * Resolves the caller from `Authorization: Bearer <key>` and the project the request
 * acts in: a project-scoped key's own project; for an org-wide key the project named by
 * `X-Kernel-Project-Id` or `X-Kernel-Project` (either takes an id or a name), else the
 * org's default project. With `cache`, a key seen before costs no database round trip
 * (auth-cache.ts says when its answers are trusted). `identified` hears of a key that
 * exists before it is judged (deleted, expired, wrong scope), so the audit log records
 * refused calls of known keys too.
 */
export async function authenticate(
  db: Queryable,
  clock: Clock,
  headers: AuthHeaders,
  scope: Exclude<AuthScope, 'public'>,
  cache?: AuthCache,
  identified?: (key: IdentifiedKey) => void,
): Promise<AuthContext> {
  const match = /^Bearer +([\x21-\x7e]+) *$/i.exec(headers.authorization ?? '');
  if (!match?.[1]) {
    throw unauthorized('Send your API key as "Authorization: Bearer <key>"');
  }
  const hash = hashApiKey(match[1]);
  const key = await (cache ? cache.lookup(hash, () => findApiKeyForRequest(db, hash)) : findApiKeyForRequest(db, hash));
  if (key) identified?.({ orgId: key.org_id, id: key.id, name: key.name, projectId: key.project_id });
  if (!key || key.deleted_at) throw unauthorized('The API key is not valid');
  if (key.expires_at && key.expires_at.getTime() <= clock.now().getTime()) {
    throw unauthorized('The API key has expired');
  }
  const apiKey = { id: key.id, name: key.name, projectId: key.project_id, invocationId: key.invocation_id };
  if (scope === 'org') {
    if (key.project_id) throw forbidden('org_key_required', 'This operation needs an org-wide API key; this key is scoped to one project');
    return { orgId: key.org_id, apiKey, project: null };
  }
  const named = await namedProject(db, key.org_id, headers);
  // The common case (no project named) needs no second query.
  const project =
    named === undefined && key.implicit_project_id !== null && key.implicit_project_name !== null
      ? { id: key.implicit_project_id, name: key.implicit_project_name }
      : await resolveProject(db, key.org_id, key.project_id, named);
  return { orgId: key.org_id, apiKey, project: { id: project.id, name: project.name } };
}

/**
 * The one project reference the two headers make. When both are sent they must name
 * the same project (an id in one and its name in the other agree): a client that
 * sends two different projects has a bug, and guessing which one it meant would put
 * resources where it did not look for them.
 */
async function namedProject(db: Queryable, orgId: string, headers: AuthHeaders): Promise<NamedProject | undefined> {
  const byId = headers.projectHeader?.trim() || undefined;
  const byName = headers.projectNameHeader?.trim() || undefined;
  if (byId === undefined && byName === undefined) return undefined;
  if (byName === undefined || byId === byName) return { ref: byId!, header: 'X-Kernel-Project-Id' };
  if (byId === undefined) return { ref: byName, header: 'X-Kernel-Project' };
  const [first, second] = await Promise.all([findProject(db, orgId, byId), findProject(db, orgId, byName)]);
  if (!first || !second || first.id !== second.id) {
    throw badRequest(
      'project_header_conflict',
      `X-Kernel-Project-Id (${JSON.stringify(byId)}) and X-Kernel-Project (${JSON.stringify(byName)}) name different projects; send one of them`,
      [{ code: 'conflict', field: 'headers.x-kernel-project', message: 'names another project than X-Kernel-Project-Id' }],
    );
  }
  return { ref: first.id, header: 'X-Kernel-Project-Id' };
}

interface NamedProject {
  ref: string;
  header: 'X-Kernel-Project-Id' | 'X-Kernel-Project';
}

async function resolveProject(
  db: Queryable,
  orgId: string,
  keyProjectId: string | null,
  named: NamedProject | undefined,
): Promise<ProjectRow> {
  if (keyProjectId) {
    const own = await findProject(db, orgId, keyProjectId);
    if (!own) throw unauthorized('The API key is not valid');
    if (named !== undefined) {
      const asked = await findProject(db, orgId, named.ref);
      if (asked?.id !== own.id) {
        throw forbidden('project_forbidden', `This API key is scoped to another project than the one in ${named.header}`);
      }
    }
    return own;
  }
  if (named !== undefined) {
    const asked = await findProject(db, orgId, named.ref);
    if (!asked) {
      throw new AppError(404, 'project_not_found', `Project ${JSON.stringify(named.ref)} named in ${named.header} was not found`);
    }
    return asked;
  }
  const fallback = await findDefaultProject(db, orgId);
  if (!fallback) {
    throw new AppError(404, 'project_not_found', 'The organisation has no default project; name one in X-Kernel-Project-Id');
  }
  return fallback;
}
