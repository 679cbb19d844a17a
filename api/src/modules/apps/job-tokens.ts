import { createHash, randomBytes } from 'node:crypto';
import type { Queryable } from '../../db/pool.js';
import type { Sealer } from '../../crypto/sealer.js';
import { unauthorized as unauthorizedError } from '../../http/errors.js';
import type { ProjectScope } from '../../scope.js';

/**
 * The tokens app Jobs present to the API's internal wire (internal-routes.ts): random 256
 * bits, stored as sha256, each naming its one subject (a deployment's build, an
 * invocation's run), so a pod can fetch and report for nothing else. Dead at its expiry
 * (the Job's deadline and a margin) or once its result is in (revoked).
 */
export type AppJobTokenKind = 'build' | 'run';

export interface AppJobGrant {
  kind: AppJobTokenKind;
  subjectId: string;
  scope: ProjectScope;
  tokenHash: string;
  gitTokenSealed: string | null;
}

const PREFIX = 'bpjob_';
const hash = (token: string) => createHash('sha256').update(token, 'utf8').digest('hex');
const gitContext = (kind: AppJobTokenKind, subjectId: string) => `app_job_tokens.git_token:${kind}:${subjectId}`;

export async function issueAppJobToken(
  db: Queryable,
  input: { kind: AppJobTokenKind; subjectId: string; scope: ProjectScope; now: Date; expiresAt: Date; gitToken?: string | undefined; sealer: Sealer },
): Promise<string> {
  const token = PREFIX + randomBytes(32).toString('base64url');
  const sealed = input.gitToken ? input.sealer.seal(input.gitToken, gitContext(input.kind, input.subjectId)) : null;
  await db.query(
    `INSERT INTO app_job_tokens (token_hash, kind, subject_id, org_id, project_id, git_token_sealed, created_at, expires_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
    [hash(token), input.kind, input.subjectId, input.scope.orgId, input.scope.projectId, sealed, input.now, input.expiresAt],
  );
  return token;
}

const unauthorized = () => unauthorizedError('A live app Job token is required (Authorization: Bearer <token>)');

/** The grant of the request's bearer token, for a route of `kind`; 401 for anything else. */
export async function authenticateAppJob(db: Queryable, header: string | undefined, kind: AppJobTokenKind, now: Date): Promise<AppJobGrant> {
  const match = /^Bearer (bpjob_[A-Za-z0-9_-]{43})$/.exec(header ?? '');
  if (!match) throw unauthorized();
  const tokenHash = hash(match[1]!);
  const { rows } = await db.query<{ kind: AppJobTokenKind; subject_id: string; org_id: string; project_id: string; git_token_sealed: string | null }>(
    `SELECT kind, subject_id, org_id, project_id, git_token_sealed FROM app_job_tokens
      WHERE token_hash = $1 AND revoked_at IS NULL AND expires_at > $2`,
    [tokenHash, now],
  );
  const row = rows[0];
  // A run's token on a build route (or the reverse) is as good as none.
  if (!row || row.kind !== kind) throw unauthorized();
  return { kind: row.kind, subjectId: row.subject_id, scope: { orgId: row.org_id, projectId: row.project_id }, tokenHash, gitTokenSealed: row.git_token_sealed };
}

export function openGitToken(grant: AppJobGrant, sealer: Sealer): string | null {
  return grant.gitTokenSealed ? sealer.open(grant.gitTokenSealed, gitContext(grant.kind, grant.subjectId)) : null;
}

/** Revokes every token of a subject (its result is in, or it ended from outside). */
export async function revokeAppJobTokens(db: Queryable, kind: AppJobTokenKind, subjectId: string, now: Date): Promise<void> {
  await db.query(`UPDATE app_job_tokens SET revoked_at = $3, git_token_sealed = NULL WHERE kind = $1 AND subject_id = $2 AND revoked_at IS NULL`, [kind, subjectId, now]);
}

/** Revokes one token (its Job could not be made). */
export async function revokeAppJobToken(db: Queryable, token: string, now: Date): Promise<void> {
  await db.query(`UPDATE app_job_tokens SET revoked_at = $2, git_token_sealed = NULL WHERE token_hash = $1 AND revoked_at IS NULL`, [hash(token), now]);
}
