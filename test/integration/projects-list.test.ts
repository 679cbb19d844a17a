import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FixedClock } from '../../api/src/clock.js';
import { errorFields, type HttpClient } from '../support/http.js';
import { startTestApp, type Tenant, type TestApp } from '../support/test-app.js';

const fields = errorFields;

interface Project {
  id: string;
  name: string;
}

describe('listing projects', () => {
  let app: TestApp;
  const clock = new FixedClock(new Date('2026-06-01T00:00:00Z'));

  beforeAll(async () => {
    app = await startTestApp({ clock });
  });
  afterAll(async () => app?.close());

  /** A fresh org with `names` created in order, one second apart (so the last is newest). */
  const orgWith = async (names: string[]): Promise<{ tenant: Tenant; created: Project[] }> => {
    const tenant = await app.newTenant('lister');
    const created: Project[] = [];
    for (const name of names) {
      clock.advance(1000);
      const res = await tenant.http.post('/org/projects', { name });
      expect(res.status, res.text).toBe(200);
      created.push(res.body);
    }
    return { tenant, created };
  };

  const names = (body: Project[]) => body.map((p) => p.name);

  it('returns a bare array, newest first, with X-Has-More false and X-Next-Offset 0', async () => {
    const { tenant } = await orgWith(['first', 'second', 'third']);
    const res = await tenant.http.get('/org/projects');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(Array.isArray(res.body)).toBe(true);
    expect(names(res.body)).toEqual(['third', 'second', 'first', 'default']);
    expect(res.headers.get('x-has-more')).toBe('false');
    expect(res.headers.get('x-next-offset')).toBe('0');
  });

  it('defaults to 20 items per page', async () => {
    const { tenant } = await orgWith(Array.from({ length: 21 }, (_, i) => `p${i}`));
    const res = await tenant.http.get('/org/projects');
    expect(res.body).toHaveLength(20);
    expect(res.headers.get('x-has-more')).toBe('true');
    expect(res.headers.get('x-next-offset')).toBe('20');
  });

  it('walks every project exactly once following X-Has-More and X-Next-Offset', async () => {
    const { tenant, created } = await orgWith(Array.from({ length: 11 }, (_, i) => `walk-${i}`));
    const seen: string[] = [];
    let offset = 0;
    let pages = 0;
    for (;;) {
      const res = await tenant.http.get<Project[]>(`/org/projects?limit=3&offset=${offset}`);
      expect(res.status).toBe(200);
      pages += 1;
      seen.push(...res.body.map((p) => p.id));
      const hasMore = res.headers.get('x-has-more');
      const next = Number(res.headers.get('x-next-offset'));
      if (hasMore === 'false') {
        expect(next).toBe(0);
        break;
      }
      expect(hasMore).toBe('true');
      expect(next).toBe(offset + res.body.length);
      offset = next;
      expect(pages).toBeLessThan(10);
    }
    expect(pages).toBe(4);
    expect(seen).toHaveLength(12);
    expect(new Set(seen).size).toBe(12);
    expect(seen.sort()).toEqual([...created.map((p) => p.id), tenant.defaultProjectId].sort());
  });

  it('has no next page when the last page is exactly full, and an empty page past the end', async () => {
    const { tenant } = await orgWith(['a', 'b', 'c']);
    const full = await tenant.http.get('/org/projects?limit=4');
    expect(full.body).toHaveLength(4);
    expect(full.headers.get('x-has-more')).toBe('false');
    expect(full.headers.get('x-next-offset')).toBe('0');
    const past = await tenant.http.get('/org/projects?offset=50');
    expect(past.body).toEqual([]);
    expect(past.headers.get('x-has-more')).toBe('false');
    expect(past.headers.get('x-next-offset')).toBe('0');
  });

  it.each([
    ['limit=0', 'query.limit'],
    ['limit=101', 'query.limit'],
    ['limit=abc', 'query.limit'],
    ['limit=2.5', 'query.limit'],
    ['limit=', 'query.limit'],
    ['offset=-1', 'query.offset'],
    ['offset=x', 'query.offset'],
    ['name=', 'query.name'],
    ['query=', 'query.query'],
    ['name=a%00b', 'query.name'],
    ['query=%00', 'query.query'],
    ['name=x&name=y', 'query.name'],
  ])('refuses %s with 400 naming %s', async (qs, field) => {
    const res = await app.tenant.http.get(`/org/projects?${qs}`);
    expect(res.status).toBe(400);
    expect(res.body.code).toBe('invalid_request');
    expect(fields(res)).toEqual([field]);
  });

  it('names every bad query parameter at once', async () => {
    const res = await app.tenant.http.get('/org/projects?limit=0&offset=-5');
    expect(res.status).toBe(400);
    expect(fields(res).sort()).toEqual(['query.limit', 'query.offset']);
  });

  it('accepts limit 1 and 100', async () => {
    const { tenant } = await orgWith(['x', 'y']);
    expect((await tenant.http.get('/org/projects?limit=1')).body).toHaveLength(1);
    expect((await tenant.http.get('/org/projects?limit=100')).body).toHaveLength(3);
  });

  it('filters by exact name, case- and accent-insensitively', async () => {
    const { tenant, created } = await orgWith(['Équipe', 'Équipe Bleue', 'other']);
    for (const name of ['equipe', 'ÉQUIPE', 'Équipe']) {
      const res = await tenant.http.get<Project[]>(`/org/projects?name=${encodeURIComponent(name)}`);
      expect(res.body.map((p) => p.id), name).toEqual([created[0]!.id]);
    }
    expect((await tenant.http.get('/org/projects?name=equip')).body).toEqual([]);
  });

  it('filters by substring of the name, or by exact id', async () => {
    const { tenant, created } = await orgWith(['Alpha Team', 'beta team', 'gamma']);
    const byText = await tenant.http.get('/org/projects?query=TEAM');
    expect(names(byText.body)).toEqual(['beta team', 'Alpha Team']);
    const byId = await tenant.http.get(`/org/projects?query=${created[2]!.id}`);
    expect(names(byId.body)).toEqual(['gamma']);
    const byIdPrefix = await tenant.http.get(`/org/projects?query=${created[2]!.id.slice(0, -2)}`);
    expect(byIdPrefix.body).toEqual([]);
  });

  it('treats LIKE wildcards in query literally', async () => {
    const { tenant } = await orgWith(['100% done', 'snake_case', 'plain']);
    expect(names((await tenant.http.get('/org/projects?query=%25')).body)).toEqual(['100% done']);
    expect(names((await tenant.http.get('/org/projects?query=_')).body)).toEqual(['snake_case']);
  });

  it('combines filters with pagination', async () => {
    const { tenant } = await orgWith(['job-1', 'job-2', 'job-3', 'other']);
    const first = await tenant.http.get('/org/projects?query=job&limit=2');
    expect(names(first.body)).toEqual(['job-3', 'job-2']);
    expect(first.headers.get('x-has-more')).toBe('true');
    expect(first.headers.get('x-next-offset')).toBe('2');
    const second = await tenant.http.get('/org/projects?query=job&limit=2&offset=2');
    expect(names(second.body)).toEqual(['job-1']);
    expect(second.headers.get('x-next-offset')).toBe('0');
  });

  it('lists archived projects and leaves deleted ones out', async () => {
    const { tenant, created } = await orgWith(['kept', 'archived', 'deleted']);
    await tenant.http.patch(`/org/projects/${created[1]!.id}`, { status: 'archived' });
    expect((await tenant.http.delete(`/org/projects/${created[2]!.id}`)).status).toBe(204);
    const res = await tenant.http.get<Array<Project & { status: string }>>('/org/projects');
    expect(res.body.map((p) => [p.name, p.status])).toEqual([
      ['archived', 'archived'],
      ['kept', 'active'],
      ['default', 'active'],
    ]);
  });
});

describe('tenant isolation of projects', () => {
  let app: TestApp;
  let mine: HttpClient;
  let theirs: { tenant: Tenant; project: Project };

  beforeAll(async () => {
    app = await startTestApp({ clock: new FixedClock(new Date('2026-06-01T00:00:00Z')) });
    mine = app.tenant.http;
    const tenant = await app.newTenant('other-org');
    const project = await tenant.http.post('/org/projects', { name: 'Their Secret' });
    theirs = { tenant, project: project.body };
  });
  afterAll(async () => app?.close());

  const refs = () => [theirs.project.id, 'Their Secret', 'their secret', theirs.tenant.defaultProjectId];

  it('answers 404 for another org’s project by id or name on every project route', async () => {
    for (const ref of refs()) {
      const path = `/org/projects/${encodeURIComponent(ref)}`;
      const calls = [
        mine.get(path),
        mine.patch(path, { name: 'hijacked' }),
        mine.delete(path),
        mine.get(`${path}/limits`),
        mine.patch(`${path}/limits`, { max_concurrent_sessions: 1 }),
      ];
      for (const res of await Promise.all(calls)) {
        expect(res.status, `${res.status} ${ref}`).toBe(404);
        expect(res.body.code).toBe('not_found');
      }
    }
    const still = await theirs.tenant.http.get(`/org/projects/${theirs.project.id}`);
    expect(still.body).toEqual(theirs.project);
    const limits = await theirs.tenant.http.get(`/org/projects/${theirs.project.id}/limits`);
    expect(limits.body.max_concurrent_sessions).toBeNull();
  });

  it('never lists another org’s projects, whatever the filter', async () => {
    for (const qs of ['', '?limit=100', '?name=their%20secret', '?query=secret', `?query=${theirs.project.id}`]) {
      const res = await mine.get<Project[]>(`/org/projects${qs}`);
      expect(res.status).toBe(200);
      const ids = res.body.map((p) => p.id);
      expect(ids, qs).not.toContain(theirs.project.id);
      expect(ids, qs).not.toContain(theirs.tenant.defaultProjectId);
    }
  });

  it('keeps org limits per org', async () => {
    const set = await theirs.tenant.http.patch('/org/limits', { default_project_max_concurrent_sessions: 7 });
    expect(set.status).toBe(200);
    expect((await mine.get('/org/limits')).body.default_project_max_concurrent_sessions).toBeNull();
  });
});
