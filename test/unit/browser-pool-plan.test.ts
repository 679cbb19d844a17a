import { describe, expect, it } from 'vitest';
import {
  CONDITION_TYPES,
  desiredPoolOf,
  DRAINING_REASONS,
  planBrowserPool,
  poolUpdateOf,
  problemOfRefusal,
  READY_REASONS,
  REQUEUE_MS,
  requeueAfterMs,
  poolStatusOf,
  type Observation,
  type ObservedPool,
  type ObservedResource,
  type Plan,
} from '../../operator/src/reconcilers/browser-pool-plan.js';
import { sameJson } from '../../operator/src/reconcilers/status.js';

// Table tests of the BrowserPool reconciler's decisions: spec → pool body, stored config →
// PATCH, observation → plan, and the status it reports. No cluster, no database.

const resource = (extra: Partial<ObservedResource> = {}): ObservedResource => ({
  key: 'ns/warm',
  name: 'warm',
  generation: 3,
  deleting: false,
  hasFinalizer: true,
  createdByApi: false,
  forceDelete: false,
  spec: { size: 2, headless: true },
  ...extra,
});

const pool = (extra: Partial<ObservedPool> = {}): ObservedPool => ({
  id: 'bpool_1',
  orgId: 'org_1',
  projectId: 'proj_1',
  name: 'warm',
  config: { size: 2, headless: true, name: 'warm' },
  size: 2,
  availableCount: 2,
  startingCount: 0,
  acquiredCount: 0,
  draining: false,
  ...extra,
});

function observe(extra: Partial<Observation> = {}): Observation {
  const r = 'resource' in extra ? extra.resource : resource();
  return {
    resource: r,
    desired: r && !r.deleting ? desiredPoolOf(r) : undefined,
    orgId: 'org_1',
    projectId: 'proj_1',
    pool: undefined,
    nameTakenBy: undefined,
    ...extra,
  };
}

describe('desiredPoolOf', () => {
  it.each([
    ['camelCase spec becomes the create body; the resource name names the pool', { size: 2, fillRatePerMinute: 50, kioskMode: true }, { size: 2, fill_rate_per_minute: 50, kiosk_mode: true, name: 'warm' }],
    ['spec.name wins over the resource name', { size: 1, name: 'Shop pool' }, { size: 1, name: 'Shop pool' }],
    ['chrome policy keys keep their spelling', { size: 1, chromePolicy: { HomepageLocation: 'https://a.test' } }, { size: 1, chrome_policy: { HomepageLocation: 'https://a.test' }, name: 'warm' }],
  ])('%s', (_, spec, input) => {
    expect(desiredPoolOf({ name: 'warm', spec })).toEqual({ ok: true, input, projectRef: undefined });
  });

  it('takes spec.project apart from the body', () => {
    expect(desiredPoolOf({ name: 'warm', spec: { size: 1, project: 'shop' } })).toMatchObject({ ok: true, projectRef: 'shop', input: { size: 1 } });
  });

  it.each([
    ['size below 1', { size: 0 }, /spec\.size/],
    ['no size', { headless: true }, /spec\.size/],
    ['an unknown field', { size: 1, colour: 'red' }, /colour/],
    ['refresh without a profile', { size: 1, refreshOnProfileUpdate: true }, /spec\.refresh_on_profile_update: needs a profile/],
    ['an empty project', { size: 1, project: '' }, /spec\.project/],
  ])('refuses %s with the schema’s words', (_, spec, message) => {
    const desired = desiredPoolOf({ name: 'warm', spec });
    expect(desired.ok).toBe(false);
    expect(!desired.ok && desired.message).toMatch(message);
  });
});

describe('poolUpdateOf', () => {
  const desired = (spec: Record<string, unknown>) => {
    const d = desiredPoolOf({ name: 'warm', spec });
    if (!d.ok) throw new Error(d.message);
    return d.input;
  };
  it.each([
    ['nothing when the spec says what is stored', { size: 2, headless: true }, { size: 2, headless: true, name: 'warm' }, undefined],
    ['nothing when the stored config spells out the defaults', { size: 2 }, { size: 2, headless: false, fill_rate_per_minute: 25, viewport: { width: 1920, height: 1080 }, name: 'warm' }, undefined],
    ['only the size, without discarding browsers', { size: 1, headless: true }, { size: 2, headless: true, name: 'warm' }, { size: 1 }],
    ['a browser field discards the idle browsers of the old configuration', { size: 2, headless: false }, { size: 2, headless: true, name: 'warm' }, { headless: false, discard_all_idle: true }],
    ['a field dropped from the spec is cleared', { size: 2 }, { size: 2, start_url: 'https://a.test/', name: 'warm' }, { start_url: '', discard_all_idle: true }],
    ['extensions added by name reach the pool and discard the idle browsers', { size: 2, extensions: [{ name: 'adblock' }] }, { size: 2, name: 'warm' }, { extensions: [{ name: 'adblock' }], discard_all_idle: true }],
    ['extensions as stored: nothing', { size: 2, extensions: [{ name: 'adblock' }] }, { size: 2, extensions: [{ name: 'adblock' }], name: 'warm' }, undefined],
    ['extensions dropped from the spec are cleared', { size: 2 }, { size: 2, extensions: [{ name: 'adblock' }], name: 'warm' }, { extensions: [], discard_all_idle: true }],
    ['a dropped profile is cleared', { size: 2 }, { size: 2, profile: { name: 'p' }, refresh_on_profile_update: true, name: 'warm' }, { profile: null, discard_all_idle: true }],
    ['a new profile keeps the refresh the manifest says', { size: 2, profile: { name: 'p' }, refreshOnProfileUpdate: false }, { size: 2, name: 'warm' }, { profile: { name: 'p' }, refresh_on_profile_update: false, discard_all_idle: true }],
    ['telemetry switched off', { size: 2 }, { size: 2, telemetry: { browser: { control: { enabled: true } } }, name: 'warm' }, { telemetry: { enabled: false }, discard_all_idle: true }],
    ['a renamed pool', { size: 2, name: 'other' }, { size: 2, name: 'warm' }, { name: 'other' }],
  ])('%s', (_, spec, config, update) => {
    const d = desired(spec);
    expect(poolUpdateOf(d, { name: (config as { name: string }).name, config })).toEqual(update);
  });

  it('telemetry switched on sets exactly the categories the spec asks for', () => {
    const update = poolUpdateOf(desired({ size: 2, telemetry: { browser: { network: { enabled: true } } } }), { name: 'warm', config: { size: 2, name: 'warm' } });
    expect(update?.telemetry?.enabled).toBe(true);
    expect(update?.telemetry?.browser?.network).toEqual({ enabled: true });
    expect(update?.telemetry?.browser?.control).toEqual({ enabled: false });
  });
});

describe('planBrowserPool', () => {
  const step = (plan: Plan) => plan.step.kind;
  it.each<[string, Partial<Observation>, Partial<Plan> & { stepKind: string; reason?: string }]>([
    ['a resource the API wrote is left alone', { resource: resource({ createdByApi: true, hasFinalizer: false }) }, { ignore: true, finalizer: 'keep', stepKind: 'none' }],
    ['a new resource gets its finalizer and its pool', { resource: resource({ hasFinalizer: false }) }, { finalizer: 'add', stepKind: 'create' }],
    ['an unchanged pool: nothing to do', { pool: pool() }, { finalizer: 'keep', stepKind: 'none' }],
    ['a changed spec updates the pool', { resource: resource({ spec: { size: 1, headless: true } }), pool: pool() }, { stepKind: 'update' }],
    ['an invalid spec changes nothing', { resource: resource({ spec: { size: -1 } }), pool: pool() }, { stepKind: 'none', reason: READY_REASONS.invalidSpec }],
    ['an unknown project', { projectId: undefined }, { stepKind: 'none', reason: READY_REASONS.projectNotFound }],
    ['no organisation yet (before bootstrap)', { orgId: undefined, projectId: undefined }, { stepKind: 'none', reason: READY_REASONS.projectNotFound }],
    ['a pool moved to another project', { projectId: 'proj_2', pool: pool() }, { stepKind: 'none', reason: READY_REASONS.invalidSpec }],
    ['a name an API pool holds is not taken over', { nameTakenBy: 'bpool_api' }, { stepKind: 'none', reason: READY_REASONS.nameConflict }],
    ['deleted: the pool starts draining', { resource: resource({ deleting: true }), pool: pool() }, { finalizer: 'keep', stepKind: 'drain' }],
    ['deleted and draining with a lease: keeps draining', { resource: resource({ deleting: true }), pool: pool({ draining: true, acquiredCount: 1 }) }, { finalizer: 'keep', stepKind: 'drain' }],
    ['deleted, drained, no lease: the pool goes and the finalizer with it', { resource: resource({ deleting: true }), pool: pool({ draining: true, availableCount: 0 }) }, { finalizer: 'remove', stepKind: 'delete' }],
    ['deleted without a pool: the finalizer goes', { resource: resource({ deleting: true }) }, { finalizer: 'remove', stepKind: 'none' }],
    ['force-deleted with leases held: the pool and its leased browsers go at once', { resource: resource({ deleting: true, forceDelete: true }), pool: pool({ acquiredCount: 2 }) }, { finalizer: 'remove', stepKind: 'delete' }],
    ['the force-delete annotation does nothing before a deletion', { resource: resource({ forceDelete: true }), pool: pool() }, { finalizer: 'keep', stepKind: 'none' }],
    ['the resource is gone but its pool is not: drained all the same', { resource: undefined, pool: pool() }, { finalizer: 'keep', stepKind: 'drain' }],
  ])('%s', (_, observation, expected) => {
    const plan = planBrowserPool(observe(observation));
    expect(step(plan)).toBe(expected.stepKind);
    if (expected.finalizer) expect(plan.finalizer).toBe(expected.finalizer);
    if (expected.ignore) expect(plan.ignore).toBe(true);
    expect(plan.problem?.reason).toBe(expected.reason);
  });

  it('only a force-delete deletes with force', () => {
    const forced = planBrowserPool(observe({ resource: resource({ deleting: true, forceDelete: true }), pool: pool({ acquiredCount: 1 }) }));
    expect(forced.step).toMatchObject({ kind: 'delete', force: true });
    const drained = planBrowserPool(observe({ resource: resource({ deleting: true }), pool: pool({ draining: true, availableCount: 0 }) }));
    expect(drained.step).toMatchObject({ kind: 'delete', force: false });
  });

  it('the pool is created in the resolved project with the desired body', () => {
    expect(planBrowserPool(observe()).step).toEqual({ kind: 'create', scope: { orgId: 'org_1', projectId: 'proj_1' }, input: { size: 2, headless: true, name: 'warm' } });
  });

  it.each([
    ['pool_name_taken', READY_REASONS.nameConflict],
    ['project_not_found', READY_REASONS.projectNotFound],
    ['pool_size_limit_exceeded', READY_REASONS.invalidSpec],
    ['not_found', READY_REASONS.invalidSpec],
  ])('an API refusal %s reads as %s', (code, reason) => {
    expect(problemOfRefusal(code, 'why').reason).toBe(reason);
  });
});

describe('poolStatusOf', () => {
  const now = new Date('2026-01-01T00:00:00Z');
  const later = new Date('2026-01-01T00:01:00Z');
  const ready = (status: ReturnType<typeof poolStatusOf>) => status.conditions.find((c) => c.type === CONDITION_TYPES.ready)!;

  it.each([
    ['full when every browser is warm or leased', pool({ availableCount: 1, acquiredCount: 1 }), 'True', READY_REASONS.full],
    ['filling below its size', pool({ availableCount: 1 }), 'False', READY_REASONS.filling],
    ['filling before the pool exists', undefined, 'False', READY_REASONS.filling],
  ])('%s', (_, p, status, reason) => {
    const s = poolStatusOf({ generation: 3, deleting: false, pool: p, problem: undefined }, undefined, now);
    expect(ready(s)).toMatchObject({ status, reason, observedGeneration: 3 });
    expect(s.observedGeneration).toBe(3);
  });

  it('reports the pool’s id, project and counts, the browsers still starting, and its scale (replicas, selector)', () => {
    const s = poolStatusOf({ generation: 1, deleting: false, pool: pool({ size: 4, availableCount: 1, acquiredCount: 1, startingCount: 2 }), problem: undefined }, undefined, now);
    expect(s).toMatchObject({ poolId: 'bpool_1', project: 'proj_1', size: 4, availableCount: 1, acquiredCount: 1, startingCount: 2, replicas: 2, selector: 'browserplane.dev/pool=bpool_1' });
  });

  it('a problem wins over the counts', () => {
    const s = poolStatusOf({ generation: 4, deleting: false, pool: pool(), problem: { reason: READY_REASONS.invalidSpec, message: 'spec.size: too small' } }, undefined, now);
    expect(ready(s)).toMatchObject({ status: 'False', reason: READY_REASONS.invalidSpec, message: 'spec.size: too small', observedGeneration: 4 });
  });

  it('while deleting: Draining says how many leases it waits for', () => {
    const s = poolStatusOf({ generation: 1, deleting: true, pool: pool({ availableCount: 0, acquiredCount: 2 }), problem: undefined }, undefined, now);
    expect(s.conditions.find((c) => c.type === CONDITION_TYPES.draining)).toMatchObject({
      status: 'True',
      reason: DRAINING_REASONS.leasesHeld,
      message: 'waiting for 2 leased browsers to be released',
    });
    expect(ready(s).reason).toBe(READY_REASONS.draining);
  });

  it('keeps lastTransitionTime unless the status flips, and reports no change for the same state', () => {
    const input = { generation: 1, deleting: false, pool: pool({ availableCount: 1 }), problem: undefined };
    const first = poolStatusOf(input, undefined, now);
    const again = poolStatusOf(input, first, later);
    // The status writer writes only what differs: the same state reads back equal.
    expect(sameJson(first, again)).toBe(true);
    const moreWarm = poolStatusOf({ ...input, pool: pool({ availableCount: 1, acquiredCount: 0, size: 3 }) }, first, later);
    expect(ready(moreWarm).lastTransitionTime).toBe(now.toISOString());
    expect(sameJson(first, moreWarm)).toBe(false);
    const full = poolStatusOf({ ...input, pool: pool() }, first, later);
    expect(ready(full).lastTransitionTime).toBe(later.toISOString());
  });

  it('requeues soon while filling or draining, rarely when full', () => {
    const plan = planBrowserPool(observe({ pool: pool() }));
    const full = poolStatusOf({ generation: 1, deleting: false, pool: pool(), problem: undefined }, undefined, now);
    const filling = poolStatusOf({ generation: 1, deleting: false, pool: pool({ availableCount: 0 }), problem: undefined }, undefined, now);
    expect(requeueAfterMs(plan, full)).toBe(REQUEUE_MS.steady);
    expect(requeueAfterMs(plan, filling)).toBe(REQUEUE_MS.filling);
    const draining = planBrowserPool(observe({ resource: resource({ deleting: true }), pool: pool() }));
    expect(requeueAfterMs(draining, filling)).toBe(REQUEUE_MS.draining);
    // An orphaned pool (its resource gone) drains on without a status to write.
    const orphan = planBrowserPool(observe({ resource: undefined, pool: pool() }));
    expect(requeueAfterMs(orphan, undefined)).toBe(REQUEUE_MS.draining);
    const removed = planBrowserPool(observe({ resource: undefined, pool: pool({ draining: true, availableCount: 0 }) }));
    expect(requeueAfterMs(removed, undefined)).toBeUndefined();
  });
});
