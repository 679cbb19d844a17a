import type { ProjectResourceCounter } from '../../app-deps.js';
import type { Clock } from '../../clock.js';
import { inTransaction, type Db, type Queryable } from '../../db/pool.js';
import { badRequest, conflict, notFound } from '../../http/errors.js';
import type { Actor, OrgScope } from '../../scope.js';
import { shareLockLiveProject } from '../projects/store.js';
import { MAX_KEY_LIFETIME_DAYS } from './schema.js';
import { generateApiKey, hashApiKey, maskApiKey } from './key-material.js';
import {
  countLiveProjectKeys,
  expireApiKeyBy,
  findApiKey,
  insertApiKey,
  renameApiKey,
  softDeleteApiKey,
  type ApiKeyRow,
} from './store.js';

const DAY_MS = 86_400_000;
export const DEFAULT_ROTATION_GRACE_DAYS = 7;

export function presentApiKey(row: ApiKeyRow) {
  return {
    id: row.id,
    name: row.name,
    masked_key: row.masked_key,
    created_at: row.created_at.toISOString(),
    created_by: {
      id: row.created_by_key_id ?? 'system',
      email: row.owner_email,
      name: row.created_by_name,
    },
    deleted_at: row.deleted_at?.toISOString() ?? null,
    expires_at: row.expires_at?.toISOString() ?? null,
    project_id: row.project_id,
    project_name: row.project_name,
  };
}

export function presentCreatedApiKey(row: ApiKeyRow, plaintext: string) {
  return { ...presentApiKey(row), key: plaintext };
}

interface IssueInput {
  orgId: string;
  projectId: string | null;
  name: string;
  lifetimeDays: number | null;
  /** An instant the caller chose; otherwise the key expires lifetimeDays after now. */
  expiresAt?: Date | null | undefined;
  createdBy: { keyId: string; name: string } | null;
  now: Date;
  /** A caller-supplied plaintext (the configured bootstrap key); generated when absent. */
  plaintext?: string;
}

/** Who a key records as its creator: a key, or nobody (shown as "system") when the system acts. */
const creatorOf = (actor: Actor): IssueInput['createdBy'] => (actor.kind === 'api_key' ? { keyId: actor.id, name: actor.name } : null);

/** Stores a new key and returns its row with the plaintext, which exists only here. */
export async function issueApiKey(db: Queryable, input: IssueInput): Promise<{ row: ApiKeyRow; plaintext: string }> {
  const plaintext = input.plaintext ?? generateApiKey();
  const row = await insertApiKey(db, {
    orgId: input.orgId,
    projectId: input.projectId,
    name: input.name,
    keyHash: hashApiKey(plaintext),
    maskedKey: maskApiKey(plaintext),
    lifetimeDays: input.lifetimeDays,
    createdBy: input.createdBy,
    now: input.now,
    expiresAt:
      input.expiresAt ?? (input.lifetimeDays === null ? null : new Date(input.now.getTime() + input.lifetimeDays * DAY_MS)),
  });
  return { row, plaintext };
}

export async function createApiKey(
  db: Db,
  clock: Clock,
  scope: OrgScope,
  actor: Actor,
  input: {
    name: string;
    days_to_expire?: number | null | undefined;
    expires_at?: Date | null | undefined;
    project_id?: string | null | undefined;
  },
) {
  const now = clock.now();
  const expiresAt = input.expires_at ?? undefined;
  if (expiresAt) checkExpiry(expiresAt, now);
  return inTransaction(db, async (tx) => {
    let projectId: string | null = null;
    if (input.project_id) {
      const project = await shareLockLiveProject(tx, scope.orgId, input.project_id);
      if (!project) throw notFound('Project', input.project_id);
      projectId = project.id;
    }
    return issueApiKey(tx, {
      orgId: scope.orgId,
      projectId,
      name: input.name,
      // A rotation gives the successor the same lifetime, so a chosen instant is kept as days.
      lifetimeDays: expiresAt ? Math.ceil((expiresAt.getTime() - now.getTime()) / DAY_MS) : (input.days_to_expire ?? null),
      expiresAt,
      createdBy: creatorOf(actor),
      now,
    });
  });
}

/** A key that is born expired, or that outlives the longest lifetime days_to_expire allows, is a mistake. */
function checkExpiry(expiresAt: Date, now: Date): void {
  const field = 'body.expires_at';
  if (expiresAt.getTime() <= now.getTime()) {
    throw badRequest('invalid_request', `expires_at must be in the future (now is ${now.toISOString()})`, [
      { code: 'too_small', field, message: `${field}: must be after ${now.toISOString()}` },
    ]);
  }
  const latest = new Date(now.getTime() + MAX_KEY_LIFETIME_DAYS * DAY_MS);
  if (expiresAt.getTime() > latest.getTime()) {
    throw badRequest('invalid_request', `expires_at must be at most ${MAX_KEY_LIFETIME_DAYS} days ahead`, [
      { code: 'too_big', field, message: `${field}: must be at or before ${latest.toISOString()}` },
    ]);
  }
}

export async function getApiKey(db: Queryable, scope: OrgScope, id: string, includeDeleted = false): Promise<ApiKeyRow> {
  const row = await findApiKey(db, scope.orgId, id, { includeDeleted });
  if (!row) throw notFound('API key', id);
  return row;
}

export async function renameKey(db: Db, scope: OrgScope, id: string, name: string): Promise<ApiKeyRow> {
  const row = await getApiKey(db, scope, id);
  await renameApiKey(db, row.id, name);
  return getApiKey(db, scope, id);
}

export async function deleteKey(db: Db, clock: Clock, scope: OrgScope, actor: Actor, id: string): Promise<void> {
  const row = await getApiKey(db, scope, id);
  if (actor.kind === 'api_key' && row.id === actor.id) {
    throw conflict('cannot_delete_own_key', 'An API key cannot delete itself; use another key');
  }
  await softDeleteApiKey(db, row.id, clock.now());
}

/**
 * Issues a successor with the same name and project and gives the old key a grace
 * period, so callers can switch without downtime.
 */
export async function rotateKey(
  db: Db,
  clock: Clock,
  scope: OrgScope,
  actor: Actor,
  id: string,
  input: { days_to_expire?: number | null | undefined; expire_in_days?: number | null | undefined },
) {
  return inTransaction(db, async (tx) => {
    const old = await findApiKey(tx, scope.orgId, id, { includeDeleted: false });
    if (!old) throw notFound('API key', id);
    if (old.project_id) {
      // An expired key may outlive its project (only live keys keep a project from being
      // deleted); its successor must not land in a deleted project. The share lock also
      // keeps a concurrent project delete from missing the new key.
      const project = await shareLockLiveProject(tx, scope.orgId, old.project_id);
      if (project?.id !== old.project_id) {
        throw conflict(
          'project_deleted',
          `The key's project ${JSON.stringify(old.project_name ?? old.project_id)} was deleted; create a new key instead`,
        );
      }
    }
    const now = clock.now();
    const lifetimeDays = input.days_to_expire === undefined ? old.lifetime_days : input.days_to_expire;
    const graceDays = input.expire_in_days ?? DEFAULT_ROTATION_GRACE_DAYS;
    await expireApiKeyBy(tx, old.id, new Date(now.getTime() + graceDays * DAY_MS));
    return issueApiKey(tx, {
      orgId: scope.orgId,
      projectId: old.project_id,
      name: old.name,
      lifetimeDays,
      createdBy: creatorOf(actor),
      now,
    });
  });
}

/** Live project-scoped keys keep their project from being deleted. */
export const countProjectApiKeys: ProjectResourceCounter = async (db, projectId, now) => ({
  kind: 'api_keys',
  count: await countLiveProjectKeys(db, projectId, now),
});
