import { describe, expect, it } from 'vitest';
import {
  connectionUpdateOf,
  desiredConnectionOf,
  planAuthConnection,
  problemOfRefusal,
  READY_REASONS,
  REQUEUE_MS,
  requeueAfterMs,
  connectionStatusOf,
  type Observation,
  type ObservedConnection,
  type ObservedResource,
  type Plan,
  type ReportedConnection,
} from '../../operator/src/reconcilers/auth-connection-plan.js';

// Table tests of the AuthConnection reconciler's decisions: spec → create body, stored
// settings → PATCH, observation → plan, and the status it reports. No cluster, no database.

const spec = { domain: 'shop.example.com', profileName: 'buyer', healthCheckInterval: 600 };

const resource = (extra: Partial<ObservedResource> = {}): ObservedResource => ({
  key: 'ns/shop',
  generation: 2,
  deleting: false,
  hasFinalizer: true,
  createdByApi: false,
  spec,
  ...extra,
});

/** The row a POST of `spec` makes: the API's defaults filled in. */
const connection = (extra: Partial<ObservedConnection> = {}): ObservedConnection => ({
  id: 'mauth_1',
  org_id: 'org_1',
  project_id: 'proj_1',
  domain: 'shop.example.com',
  profile_name: 'buyer',
  allowed_domains: [],
  auto_reauth: true,
  health_checks: true,
  health_check_interval: 600,
  login_url: null,
  proxy_id: null,
  record_session: false,
  save_credentials: true,
  browser_telemetry: null,
  credential: null,
  ...extra,
});

const scope = { orgId: 'org_1', projectId: 'proj_1', projectName: 'default' };

function observe(extra: Partial<Observation> = {}): Observation {
  const r = 'resource' in extra ? extra.resource : resource();
  return {
    resource: r,
    desired: r && !r.deleting ? desiredConnectionOf(r) : undefined,
    scope,
    connection: undefined,
    proxyId: undefined,
    refusal: undefined,
    takenBy: undefined,
    ...extra,
  };
}

describe('desiredConnectionOf', () => {
  it('reads the spec as the API create body, Kubernetes spelling to wire spelling, project apart', () => {
    const desired = desiredConnectionOf({ spec: { ...spec, project: 'shop', allowedDomains: ['id.example.com'], credential: { name: 'buyer-cred' } } });
    expect(desired).toEqual({
      ok: true,
      projectRef: 'shop',
      input: { domain: 'shop.example.com', profile_name: 'buyer', health_check_interval: 600, allowed_domains: ['id.example.com'], credential: { name: 'buyer-cred' } },
    });
  });

  it.each([
    ['a spec that is no object', null, /^spec: must be an object/],
    ['a missing domain', { profileName: 'buyer' }, /spec\.domain/],
    ['a credential with both name and provider', { ...spec, credential: { name: 'a', provider: 'vault', path: 'x' } }, /spec\.credential/],
    ['an empty project', { ...spec, project: '' }, /spec\.project/],
  ])('refuses %s', (_what, value, message) => {
    const desired = desiredConnectionOf({ spec: value });
    expect(desired.ok).toBe(false);
    expect(!desired.ok && desired.message).toMatch(message);
  });
});

describe('connectionUpdateOf', () => {
  const desired = (extra: Record<string, unknown> = {}) => {
    const d = desiredConnectionOf({ spec: { ...spec, ...extra } });
    if (!d.ok) throw new Error(d.message);
    return d.input;
  };

  it.each<[string, Record<string, unknown>, Partial<ObservedConnection>, string | undefined, Record<string, unknown> | undefined]>([
    ['nothing when the row already says what the spec says (defaults count as given)', {}, {}, undefined, undefined],
    ['only the interval when only it changed', { healthCheckInterval: 900 }, {}, undefined, { health_check_interval: 900 }],
    ['health checks off, nothing else', { healthChecks: false }, {}, undefined, { health_checks: false }],
    ['a login URL removed from the spec is cleared with ""', {}, { login_url: 'https://shop.example.com/login' }, undefined, { login_url: '' }],
    ['allowed domains compared as a set', { allowedDomains: ['b.example.com', 'a.example.com'] }, { allowed_domains: ['a.example.com', 'b.example.com'] }, undefined, undefined],
    ['telemetry enabled false reads back as none', { browserTelemetry: { enabled: false } }, {}, undefined, undefined],
    ['a credential named in the spec that the row lacks', { credential: { name: 'c' } }, {}, undefined, { credential: { name: 'c' } }],
    ['a credential the row has and the spec omits is left (a login may have saved it)', {}, { credential: { name: 'saved' } }, undefined, undefined],
    ['a proxy resolved to another id', { proxy: { name: 'eu' } }, { proxy_id: 'proxy_old' }, 'proxy_new', { proxy: { id: 'proxy_new' } }],
    ['the same proxy by name', { proxy: { name: 'eu' } }, { proxy_id: 'proxy_new' }, 'proxy_new', undefined],
  ])('%s', (_what, extra, row, proxyId, expected) => {
    expect(connectionUpdateOf(desired(extra), connection(row), proxyId)).toEqual(expected);
  });
});

describe('planAuthConnection', () => {
  const cases: [string, Partial<Observation>, Partial<Plan> & { stepKind: string; reason?: string }][] = [
    ['a new resource: finalizer first, then a create in its scope', { resource: resource({ hasFinalizer: false }) }, { finalizer: 'add', stepKind: 'create' }],
    ['a resource matching its row: nothing', { connection: connection() }, { finalizer: 'keep', stepKind: 'none' }],
    ['a changed interval: an update of that field', { resource: resource({ spec: { ...spec, healthCheckInterval: 1200 } }), connection: connection() }, { finalizer: 'keep', stepKind: 'update' }],
    ['an invalid spec: InvalidSpec, nothing done', { resource: resource({ spec: { profileName: 'buyer' } }), connection: connection() }, { finalizer: 'keep', stepKind: 'none', reason: READY_REASONS.invalidSpec }],
    ['a proxy the API cannot resolve: InvalidSpec', { refusal: { code: 'not_found', message: 'Proxy "x" was not found' } }, { stepKind: 'none', reason: READY_REASONS.invalidSpec }],
    ['an API connection on the same domain and profile: NameConflict, nothing taken', { takenBy: 'mauth_api' }, { stepKind: 'none', reason: READY_REASONS.nameConflict }],
    ['no such project: ProjectNotFound', { scope: undefined }, { stepKind: 'none', reason: READY_REASONS.projectNotFound }],
    ['another domain for a made row: InvalidSpec (delete and apply again)', { resource: resource({ spec: { ...spec, domain: 'other.example.com' } }), connection: connection() }, { stepKind: 'none', reason: READY_REASONS.invalidSpec }],
    ['deleted with a row: delete it and release the finalizer', { resource: resource({ deleting: true }), connection: connection() }, { finalizer: 'remove', stepKind: 'delete' }],
    ['deleted without a row: just release the finalizer', { resource: resource({ deleting: true }) }, { finalizer: 'remove', stepKind: 'none' }],
    ['gone (finalizer removed by hand) with a row: delete the orphan', { resource: undefined, connection: connection() }, { finalizer: 'keep', stepKind: 'delete' }],
    ['written by the API: ignored', { resource: resource({ createdByApi: true }), connection: connection() }, { ignore: true, finalizer: 'keep', stepKind: 'none' }],
  ];
  it.each(cases)('%s', (_what, extra, expected) => {
    const plan = planAuthConnection(observe(extra));
    const { stepKind, reason, ...rest } = expected;
    expect(plan).toMatchObject(rest);
    expect(plan.step.kind).toBe(stepKind);
    expect(plan.problem?.reason).toBe(reason);
  });

  it('creates in the resolved scope with the create body, and updates only the changed field', () => {
    const created = planAuthConnection(observe());
    expect(created.step).toEqual({ kind: 'create', scope, input: { domain: 'shop.example.com', profile_name: 'buyer', health_check_interval: 600 } });
    const updated = planAuthConnection(observe({ resource: resource({ spec: { ...spec, healthCheckInterval: 1200 } }), connection: connection() }));
    expect(updated.step).toEqual({ kind: 'update', connectionId: 'mauth_1', scope, input: { health_check_interval: 1200 } });
    const deleted = planAuthConnection(observe({ resource: resource({ deleting: true }), connection: connection() }));
    expect(deleted.step).toEqual({ kind: 'delete', connectionId: 'mauth_1', scope: { orgId: 'org_1', projectId: 'proj_1' } });
  });

  it('maps the API’s refusals onto reasons', () => {
    expect(problemOfRefusal('auth_connection_exists', 'exists').reason).toBe(READY_REASONS.nameConflict);
    expect(problemOfRefusal('not_found', 'Credential "nope" was not found')).toEqual({ reason: READY_REASONS.invalidSpec, message: 'not_found: Credential "nope" was not found' });
    expect(problemOfRefusal('not_found', 'Project "x" was not found').reason).toBe(READY_REASONS.projectNotFound);
  });
});

describe('connectionStatusOf', () => {
  const now = new Date('2026-05-01T10:00:00.000Z');
  const reported = (extra: Partial<ReportedConnection> = {}): ReportedConnection => ({
    id: 'mauth_1',
    project_id: 'proj_1',
    domain: 'shop.example.com',
    status: 'NEEDS_AUTH',
    last_auth_check_at: null,
    credential_id: null,
    credential_value_keys: null,
    credential_has_totp: null,
    login_requirements: null,
    flow: null,
    ...extra,
  });
  const ready = (s: ReturnType<typeof connectionStatusOf>) => s.conditions.find((c) => c.type === 'Ready')!;

  it.each<[string, Partial<ReportedConnection>, string, string]>([
    ['no login yet: NeedsAuth', {}, 'False', READY_REASONS.needsAuth],
    ['a flow running: LoginInProgress', { flow: { status: 'IN_PROGRESS', step: 'AWAITING_INPUT', type: 'LOGIN', error_message: null } }, 'False', READY_REASONS.loginInProgress],
    ['logged in: Authenticated', { status: 'AUTHENTICATED', flow: { status: 'SUCCESS', step: 'COMPLETED', type: 'LOGIN', error_message: null } }, 'True', READY_REASONS.authenticated],
    ['the last login failed: NeedsAuth with the error', { flow: { status: 'FAILED', step: 'SUBMITTING', type: 'LOGIN', error_message: 'Wrong password' } }, 'False', READY_REASONS.needsAuth],
  ])('%s', (_what, row, status, reason) => {
    const s = connectionStatusOf({ generation: 4, connection: reported(row), problem: undefined }, undefined, now);
    expect(ready(s)).toMatchObject({ status, reason, observedGeneration: 4, lastTransitionTime: '2026-05-01T10:00:00Z' });
    expect(s).toMatchObject({ observedGeneration: 4, connectionId: 'mauth_1', project: 'proj_1', status: row.status ?? 'NEEDS_AUTH', canReauth: false, canReauthReason: 'no_credential' });
  });

  it('reports the flow (a finished one as COMPLETED) and the check time, never a hosted URL', () => {
    const s = connectionStatusOf(
      {
        generation: 1,
        connection: reported({ status: 'AUTHENTICATED', last_auth_check_at: new Date('2026-05-01T09:59:58.123Z'), flow: { status: 'SUCCESS', step: 'SUBMITTING', type: 'REAUTH', error_message: null } }),
        problem: undefined,
      },
      undefined,
      now,
    );
    expect(s).toMatchObject({ flowStatus: 'SUCCESS', flowStep: 'COMPLETED', flowType: 'REAUTH', lastAuthCheckAt: '2026-05-01T09:59:58Z' });
    expect(JSON.stringify(s)).not.toMatch(/hosted|code=/);
  });

  it('a problem wins over the row, which is still reported; the transition time stays while status does not flip', () => {
    const earlier = connectionStatusOf({ generation: 1, connection: reported(), problem: undefined }, undefined, new Date('2026-05-01T09:00:00Z'));
    const s = connectionStatusOf({ generation: 2, connection: reported(), problem: { reason: READY_REASONS.invalidSpec, message: 'spec.domain: bad' } }, earlier, now);
    expect(ready(s)).toMatchObject({ status: 'False', reason: READY_REASONS.invalidSpec, message: 'spec.domain: bad', lastTransitionTime: '2026-05-01T09:00:00Z' });
    expect(s.connectionId).toBe('mauth_1');
    const none = connectionStatusOf({ generation: 2, connection: undefined, problem: { reason: READY_REASONS.nameConflict, message: 'taken' } }, undefined, now);
    expect(none).toEqual({ observedGeneration: 2, conditions: [expect.objectContaining({ reason: READY_REASONS.nameConflict })] });
  });

  it('requeues soon while a flow runs, rarely otherwise, never when ignored or deleted', () => {
    const running = connectionStatusOf({ generation: 1, connection: reported({ flow: { status: 'IN_PROGRESS', step: 'DISCOVERING', type: 'LOGIN', error_message: null } }), problem: undefined }, undefined, now);
    const idle = connectionStatusOf({ generation: 1, connection: reported(), problem: undefined }, undefined, now);
    const plan = (extra: Partial<Plan> = {}): Plan => ({ ignore: false, finalizer: 'keep', step: { kind: 'none' }, problem: undefined, ...extra });
    expect(requeueAfterMs(plan(), running)).toBe(REQUEUE_MS.flowRunning);
    expect(requeueAfterMs(plan(), idle)).toBe(REQUEUE_MS.steady);
    expect(requeueAfterMs(plan({ ignore: true }), idle)).toBeUndefined();
    expect(requeueAfterMs(plan(), undefined)).toBeUndefined();
  });
});
