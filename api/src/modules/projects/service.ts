import type { AppDeps } from '../../app-deps.js';
import { inTransaction, onUniqueViolation } from '../../db/pool.js';
import { badRequest, conflict, notFound } from '../../http/errors.js';
import type { OrgScope } from '../../scope.js';
import { getOrg, setDefaultProjectSessionCap } from '../orgs/store.js';
import {
  countOrgUsage,
  findProject,
  getLimits,
  insertProject,
  lockLiveProject,
  softDeleteProject,
  updateLimits,
  updateProject,
  type LimitName,
  type LimitsRow,
  type ProjectRow,
} from './store.js';

type Deps = Pick<AppDeps, 'db' | 'clock' | 'settings' | 'projectResources'>;

export function presentProject(row: ProjectRow) {
  return {
    id: row.id,
    name: row.name,
    status: row.status,
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
  };
}

const nameTaken = (name: string) =>
  conflict('project_name_taken', `A project named ${JSON.stringify(name)} already exists in this organisation`);

function uniqueName<T>(name: string | undefined, write: () => Promise<T>): Promise<T> {
  return name === undefined ? write() : onUniqueViolation(write, () => nameTaken(name));
}

export async function createProject({ db, clock }: Deps, scope: OrgScope, name: string): Promise<ProjectRow> {
  return uniqueName(name, () => insertProject(db, { orgId: scope.orgId, name, isDefault: false, now: clock.now() }));
}

export async function getProject({ db }: Pick<Deps, 'db'>, scope: OrgScope, idOrName: string): Promise<ProjectRow> {
  const row = await findProject(db, scope.orgId, idOrName);
  if (!row) throw notFound('Project', idOrName);
  return row;
}

export async function changeProject(
  deps: Deps,
  scope: OrgScope,
  idOrName: string,
  change: { name?: string | undefined; status?: 'active' | 'archived' | undefined },
): Promise<ProjectRow> {
  const row = await getProject(deps, scope, idOrName);
  const updated = await uniqueName(change.name, () => updateProject(deps.db, row.id, { ...change, now: deps.clock.now() }));
  if (!updated) throw notFound('Project', idOrName);
  return updated;
}

/**
 * Soft-deletes an empty project. The row lock makes the emptiness check and the delete
 * one step against resources being added at the same time.
 */
export async function deleteProject(deps: Deps, scope: OrgScope, idOrName: string): Promise<void> {
  await inTransaction(deps.db, async (tx) => {
    const row = await findProject(tx, scope.orgId, idOrName);
    if (!row || !(await lockLiveProject(tx, row.id))) throw notFound('Project', idOrName);
    if (row.is_default) {
      throw conflict('default_project', 'The default project cannot be deleted; org-wide keys fall back to it');
    }
    const now = deps.clock.now();
    // One after the other: a transaction's client runs one query at a time (pg queues
    // concurrent ones, deprecated, and pg 9 refuses them).
    const counts = [];
    for (const count of deps.projectResources) counts.push(await count(tx, row.id, now));
    const inUse = counts.filter((c) => c.count > 0);
    if (inUse.length) {
      throw conflict(
        'project_not_empty',
        `Project ${JSON.stringify(row.name)} still has active resources; delete them first`,
        inUse.map((c) => ({ code: 'active_resource', field: c.kind, message: `${c.count} active ${c.kind}` })),
      );
    }
    await softDeleteProject(tx, row.id, now);
  });
}

export async function readLimits(deps: Deps, scope: OrgScope, idOrName: string): Promise<LimitsRow> {
  const row = await getProject(deps, scope, idOrName);
  return getLimits(deps.db, row.id);
}

/** 0 and null both remove a cap; absent fields stay. */
export async function changeLimits(
  deps: Deps,
  scope: OrgScope,
  idOrName: string,
  body: Partial<Record<LimitName, number | null | undefined>>,
): Promise<LimitsRow> {
  const row = await getProject(deps, scope, idOrName);
  const change: Partial<LimitsRow> = {};
  for (const [name, value] of Object.entries(body) as [LimitName, number | null | undefined][]) {
    if (value !== undefined) change[name] = value === 0 ? null : value;
  }
  const sessions = change.max_concurrent_sessions;
  if (sessions && sessions > deps.settings.orgMaxConcurrentSessions) {
    throw exceedsOrgLimit('body.max_concurrent_sessions', sessions, deps.settings.orgMaxConcurrentSessions);
  }
  return updateLimits(deps.db, row.id, change, deps.clock.now());
}

function exceedsOrgLimit(field: string, value: number, limit: number) {
  return badRequest('exceeds_org_limit', `${field} (${value}) cannot exceed the organisation limit of ${limit}`, [
    { code: 'too_big', field, message: `${field}: must be at most ${limit}, the organisation limit` },
  ]);
}

export async function readOrgLimits(deps: Deps, scope: OrgScope) {
  const org = await getOrg(deps.db, scope.orgId);
  return presentOrgLimits(deps, scope, org.default_project_max_concurrent_sessions);
}

export async function changeOrgLimits(deps: Deps, scope: OrgScope, value: number | null | undefined) {
  if (value === undefined) return readOrgLimits(deps, scope);
  const cap = value === 0 ? null : value;
  if (cap && cap > deps.settings.orgMaxConcurrentSessions) {
    throw exceedsOrgLimit('body.default_project_max_concurrent_sessions', cap, deps.settings.orgMaxConcurrentSessions);
  }
  const org = await setDefaultProjectSessionCap(deps.db, scope.orgId, cap, deps.clock.now());
  return presentOrgLimits(deps, scope, org.default_project_max_concurrent_sessions);
}

/** The shortest health_check_interval when the service sets none (auth-connections' DEFAULT_MIN_HEALTH_CHECK_INTERVAL). */
const DEFAULT_MIN_HEALTH_CHECK_SECONDS = 300;

/**
 * The fields newer SDKs require (Python 0.131 OrgLimits). There are no vaults here, so
 * none are used and none may be made; auth connections have no org-wide cap (null).
 */
async function presentOrgLimits(deps: Deps, scope: OrgScope, defaultCap: number | null) {
  const used = await countOrgUsage(deps.db, scope.orgId);
  const max = deps.settings.orgMaxConcurrentSessions;
  return {
    max_concurrent_sessions: max,
    default_project_max_concurrent_sessions: defaultCap,
    concurrent_sessions_used: used.sessions,
    concurrent_sessions_available: Math.max(0, max - used.sessions),
    auth_connections_used: used.authConnections,
    max_auth_connections: null,
    min_health_check_interval_seconds: deps.settings.authMinHealthCheckIntervalSeconds ?? DEFAULT_MIN_HEALTH_CHECK_SECONDS,
    vaults_used: 0,
    max_vaults: 0,
  };
}
