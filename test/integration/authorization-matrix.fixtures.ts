import { randomBytes } from 'node:crypto';
import { expect } from 'vitest';
import type { Db } from '../../api/src/db/pool.js';
import type { FixedClock } from '../../api/src/clock.js';
import type { HttpClient } from '../support/http.js';
import type { Tenant, TestApp } from '../support/test-app.js';
import type { CreatedApiKey } from './api-keys.fixtures.js';
import { insertDeployment, setDeploymentStatus } from '../../api/src/modules/apps/deployments-store.js';
import { insertReplay } from '../../api/src/modules/replays/store.js';
import { insertExtension } from '../../api/src/modules/extensions/store.js';

/**
 * Tenant A ("alpha") owning one of every resource, the identities that must not reach
 * them, and how to fill an operation of the OpenAPI document with A's values.
 */

const DAY_MS = 86_400_000;

/** A resource of tenant A that a path parameter can name. */
export interface Owned {
  id: string;
  /** Set where the routes also find it by name (`{id_or_name}`). */
  name?: string;
}

export interface Alpha {
  tenant: Tenant;
  /** A second project of A's org, and a key scoped to it. */
  otherProject: { id: string; name: string };
  otherProjectKey: string;
  /** A's key that worked, then expired (the clock moved past it). */
  expiredKey: string;
  /** A's key that worked, then was deleted. */
  deletedKey: string;
  /** By the path prefix of the routes that take them. */
  resources: Record<string, Owned>;
  /** A recording of A's browser ({replay_id}), written directly: the matrix's browsers record nothing. */
  replayId: string;
  /** Ids, names and secret values of A's that no other identity may see. */
  secrets: string[];
}

const must = async <T = any>(res: Promise<{ status: number; body: T; text: string }>): Promise<T> => {
  const done = await res;
  expect(done.status, done.text).toBeLessThan(300);
  return done.body;
};

export const PROXY_PASSWORD = 'alpha-proxy-password-8c1f';
export const CREDENTIAL_PASSWORD = 'alpha-credential-password-2d7e';
export const PROVIDER_TOKEN = 'alpha-provider-token-5b9a';

/** Tenant A with one of every resource in its default project; the clock ends 2 days later. */
export async function arrangeAlpha(app: TestApp, clock: FixedClock): Promise<Alpha> {
  const tenant = await app.newTenant('alpha');
  const http = tenant.http;
  const key = await must(http.post<CreatedApiKey>('/org/api_keys', { name: 'alpha-ci-key' }));
  const expiring = await must(http.post<CreatedApiKey>('/org/api_keys', { name: 'alpha-expiring-key', days_to_expire: 1 }));
  const deleting = await must(http.post<CreatedApiKey>('/org/api_keys', { name: 'alpha-deleted-key' }));
  const other = await must(http.post('/org/projects', { name: 'alpha-other-project' }));
  const otherKey = await must(http.post<CreatedApiKey>('/org/api_keys', { name: 'alpha-other-project-key', project_id: other.id }));
  const proxy = await must(
    http.post('/proxies', { type: 'custom', name: 'alpha-proxy', config: { host: 'proxy.alpha.test', port: 3128, username: 'alpha-user', password: PROXY_PASSWORD } }),
  );
  const credential = await must(
    http.post('/credentials', {
      name: 'alpha-credential',
      domain: 'alpha-shop.test',
      values: { username: 'alpha-login', password: CREDENTIAL_PASSWORD },
      totp_secret: 'GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ',
    }),
  );
  const profile = await must(http.post('/profiles', { name: 'alpha-profile' }));
  // Its Connect server refuses connections at once: A's own test and items calls fail fast, never waiting on DNS.
  const provider = await must(
    http.post('/org/credential_providers', { name: 'alpha-provider', provider_type: 'onepassword', token: PROVIDER_TOKEN, connect_url: 'http://127.0.0.1:9' }),
  );
  const invocation = await must(http.post('/invocations', { app_name: 'alpha-app', action_name: 'alpha-action', version: 'alpha-1', async: true }));
  const browser = await must(http.post('/browsers', { name: 'alpha-browser', tags: { owner: 'alpha-tag' }, invocation_id: invocation.id }));
  const pool = await must(http.post('/browser_pools', { name: 'alpha-pool', size: 1 }));
  const replayId = 'rpl_alpha_matrix';
  await insertReplay(app.database.db, {
    id: replayId,
    session_id: browser.session_id,
    org_id: tenant.orgId,
    project_id: tenant.defaultProjectId,
    framerate: 10,
    max_duration_s: 60,
    started_at: clock.now(),
    expires_at: new Date(clock.now().getTime() + 7 * DAY_MS),
  });
  // Written directly (the matrix's client sends JSON, an upload is multipart); its bytes are never read here.
  const extension = await insertExtension(app.database.db, { orgId: tenant.orgId, projectId: tenant.defaultProjectId }, {
    name: 'alpha-extension',
    archive: Buffer.from('alpha-extension-bytes'),
    checksum: null,
    manifestName: 'alpha manifest',
    manifestVersion: '1.0',
    now: clock.now(),
  });
  // Written directly: a deployment made over HTTP would start a real build (npm) in the background.
  const deployment = await insertDeployment(app.database.db, { orgId: tenant.orgId, projectId: tenant.defaultProjectId }, {
    id: 'dep_alpha_matrix',
    entrypointRelPath: 'alpha-entry.ts',
    envVars: { ALPHA_ENV: 'alpha-env-value' },
    version: 'alpha-version',
    force: false,
    source: { type: 'github', url: 'https://git.alpha.test/app.git', ref: 'main', path: null },
    now: clock.now(),
  });
  // Finished at once, so the app's build queue leaves it alone.
  await setDeploymentStatus(app.database.db, deployment.id, { status: 'failed', from: ['queued'], statusReason: 'alpha-reason', now: clock.now() });
  const connection = await must(
    http.post('/auth/connections', { domain: 'alpha-login.test', profile_name: 'alpha-login-profile', health_checks: false }),
  );

  // Both keys work before they stop working, so the 401s below are the expiry and the deletion.
  for (const plaintext of [expiring.key, deleting.key]) expect((await app.client(plaintext).get('/org/api_keys')).status).toBe(200);
  expect((await http.delete(`/org/api_keys/${deleting.id}`)).status).toBe(204);
  clock.advance(2 * DAY_MS);

  const resources: Record<string, Owned> = {
    '/org/api_keys': { id: key.id },
    '/org/projects': { id: tenant.defaultProjectId },
    '/projects': { id: tenant.defaultProjectId },
    '/invocations': { id: invocation.id },
    '/proxies': { id: proxy.id, name: proxy.name },
    '/credentials': { id: credential.id, name: credential.name },
    '/profiles': { id: profile.id, name: profile.name },
    '/browsers': { id: browser.session_id, name: browser.name },
    '/browser_pools': { id: pool.id, name: pool.name },
    '/auth/connections': { id: connection.id },
    '/deployments': { id: deployment.id },
    '/org/credential_providers': { id: provider.id, name: provider.name },
    '/extensions': { id: extension.id, name: extension.name! },
  };
  const secrets = [
    tenant.orgId,
    'alpha@example.test',
    tenant.adminKeyId,
    ...[key, expiring, deleting, otherKey].flatMap((k) => [k.id, k.name, k.masked_key]),
    'alpha-tag',
    'alpha-app',
    'alpha-action',
    'alpha-shop.test',
    'alpha-login',
    'alpha-login.test',
    'alpha-login-profile',
    'proxy.alpha.test',
    'alpha-env-value',
    'git.alpha.test',
    'alpha-user',
    PROXY_PASSWORD,
    CREDENTIAL_PASSWORD,
    replayId,
    PROVIDER_TOKEN,
    ...Object.values(resources).flatMap((r) => [r.id, ...(r.name ? [r.name] : [])]),
  ];
  return {
    tenant,
    replayId,
    otherProject: { id: other.id, name: other.name },
    otherProjectKey: otherKey.key,
    expiredKey: expiring.key,
    deletedKey: deleting.key,
    resources,
    secrets: [...new Set(secrets)],
  };
}

/** Where a request names A's resource: in its path, in its body, or nowhere. */
export type Naming = 'path' | 'body' | null;

/** What an identity must get from a route. */
export type Expect =
  | { refused: 401 }
  | { refused: 403 | 404; code: string }
  /** A reference in a body to something the caller cannot see: 404, or 400 naming the field. */
  | { refused: 'absent' }
  /** Acts in the caller's own scope: anything but a 5xx, and none of A's data. */
  | { ownScope: true };

export interface Identity {
  label: string;
  headers: Record<string, string>;
  /** null: this identity is not tried on routes of that scope. */
  onOrgRoute: (naming: Naming) => Expect | null;
  onProjectRoute: (naming: Naming) => Expect;
}

const bearer = (key: string, more: Record<string, string> = {}) => ({ authorization: `Bearer ${key}`, ...more });
const unauthenticated = { onOrgRoute: () => ({ refused: 401 }) as const, onProjectRoute: () => ({ refused: 401 }) as const };
const notFound = { refused: 404, code: 'not_found' } as const;
const scoped = (naming: Naming): Expect => (naming === 'path' ? notFound : naming === 'body' ? { refused: 'absent' } : { ownScope: true });

/** Everyone who is not tenant A acting in its default project. */
export async function identities(app: TestApp, alpha: Alpha): Promise<Identity[]> {
  const bravo = await app.newTenant('bravo');
  const projectHeader = 'X-Kernel-Project-Id';
  const orgKeyRequired = { refused: 403, code: 'org_key_required' } as const;
  return [
    { label: 'no key', headers: {}, ...unauthenticated },
    { label: 'malformed key', headers: { authorization: 'Basic YWxwaGE6c2VjcmV0' }, ...unauthenticated },
    { label: 'unknown key', headers: bearer(`bp_${randomBytes(32).toString('base64url')}`), ...unauthenticated },
    { label: 'expired key of A', headers: bearer(alpha.expiredKey), ...unauthenticated },
    { label: 'deleted key of A', headers: bearer(alpha.deletedKey), ...unauthenticated },
    { label: 'key of org B', headers: bearer(bravo.adminKey), onOrgRoute: scoped, onProjectRoute: scoped },
    {
      label: "key of org B naming A's project",
      headers: bearer(bravo.adminKey, { [projectHeader]: alpha.tenant.defaultProjectId }),
      onOrgRoute: scoped,
      onProjectRoute: () => ({ refused: 404, code: 'project_not_found' }),
    },
    {
      label: "A's key of another project",
      headers: bearer(alpha.otherProjectKey),
      onOrgRoute: () => orgKeyRequired,
      onProjectRoute: scoped,
    },
    {
      label: "A's key of another project naming A's default project",
      headers: bearer(alpha.otherProjectKey, { [projectHeader]: alpha.tenant.defaultProjectId }),
      onOrgRoute: () => orgKeyRequired,
      onProjectRoute: () => ({ refused: 403, code: 'project_forbidden' }),
    },
    {
      // A's own org-wide key acts on A's org on org routes, legitimately: not tried there.
      label: "A's org key acting in another project",
      headers: bearer(alpha.tenant.adminKey, { [projectHeader]: alpha.otherProject.id }),
      onOrgRoute: () => null,
      onProjectRoute: scoped,
    },
  ];
}

/**
 * Tables that record the probes themselves rather than anyone's resources: the audit log
 * gains a row for every refused call, naming the id the caller sent (its own org's log).
 */
const RECORDS_OF_CALLS = ['audit_logs'];

/** Every row of every table in the public schema, by table, in a stable order. */
export async function snapshotRows(db: Db, ignoredColumns: string[]): Promise<Map<string, string[]>> {
  const { rows: tables } = await db.query<{ name: string }>(
    "SELECT table_name AS name FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE' AND NOT (table_name = ANY($1)) ORDER BY 1",
    [RECORDS_OF_CALLS],
  );
  const out = new Map<string, string[]>();
  for (const { name } of tables) {
    const { rows } = await db.query(`SELECT * FROM "${name}"`);
    const shown = rows.map((row: Record<string, unknown>) => {
      for (const column of ignoredColumns) delete row[column];
      return JSON.stringify(row, (_k, v: unknown) => (Buffer.isBuffer(v) ? v.toString('hex') : v));
    });
    out.set(name, shown.sort());
  }
  return out;
}

/**
 * What changed between two snapshots that touches tenant A: a row of A's that changed or
 * vanished, or a new row that names one of A's default-project resources.
 */
export function alphaChanges(before: Map<string, string[]>, after: Map<string, string[]>, alpha: Alpha): string[] {
  const ofAlpha = (row: string) => row.includes(alpha.tenant.orgId) || alpha.secrets.some((s) => s.length > 8 && row.includes(s));
  const defaultScope = [alpha.tenant.defaultProjectId, ...Object.values(alpha.resources).map((r) => r.id)];
  const changes: string[] = [];
  for (const [table, rows] of before) {
    const now = new Set(after.get(table) ?? []);
    for (const row of rows) if (ofAlpha(row) && !now.has(row)) changes.push(`${table}: changed or removed ${row}`);
    const was = new Set(rows);
    for (const row of after.get(table) ?? []) {
      if (!was.has(row) && defaultScope.some((id) => row.includes(id))) changes.push(`${table}: new row naming A ${row}`);
    }
  }
  return changes;
}

export type { HttpClient };
