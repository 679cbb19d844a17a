import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FixedClock } from '../../api/src/clock.js';
import { errorFields, type HttpClient } from '../support/http.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { type Credential, createCredential, allCredentials } from './credentials.fixtures.js';

const namesOf = (items: Credential[]) => items.map((c) => c.name);

describe('credentials: create, read, list, delete', () => {
  let app: TestApp;
  let http: HttpClient;
  const clock = new FixedClock(new Date('2026-06-01T00:00:00Z'));

  beforeAll(async () => {
    app = await startTestApp({ clock });
    http = app.tenant.http;
  });
  afterAll(async () => app?.close());

  /** A client acting in a fresh project of the first org. */
  const inNewProject = async (name: string) => {
    const project = await http.post('/org/projects', { name });
    expect(project.status).toBe(200);
    return { project: project.body as { id: string }, http: http.withHeaders({ 'X-Kernel-Project-Id': project.body.id }) };
  };

  describe('create', () => {
    it('returns the credential with its value names but never its values', async () => {
      const res = await http.post('/credentials', {
        name: 'create-shape',
        domain: 'example.com',
        values: { username: 'alice@example.com', password: 'hunter2-create' },
      });
      expect(res.status, res.text).toBe(200);
      expect(res.body).toEqual({
        id: expect.stringMatching(/^cred_[a-z2-7]{24}$/),
        name: 'create-shape',
        domain: 'example.com',
        created_at: clock.now().toISOString(),
        updated_at: clock.now().toISOString(),
        has_values: true,
        has_totp_secret: false,
        sso_provider: null,
        totp_algorithm: 'SHA1',
        totp_digits: 6,
        totp_period: 30,
        value_keys: ['username', 'password'],
      });
      expect(res.text).not.toContain('hunter2-create');
      expect(res.text).not.toContain('alice@example.com');
    });

    it('normalises the name, domain, SSO provider and an empty TOTP secret', async () => {
      const created = await createCredential(http, {
        name: '  padded  ',
        domain: ' Bücher.EXAMPLE. ',
        sso_provider: ' Google ',
        totp_secret: '',
      });
      expect(created).toMatchObject({
        name: 'padded',
        domain: 'xn--bcher-kva.example',
        sso_provider: 'Google',
        has_totp_secret: false,
      });
      expect(created).not.toHaveProperty('totp_code');
      const noSso = await createCredential(http, { name: 'sso-empty', sso_provider: '' });
      expect(noSso.sso_provider).toBeNull();
      const nullSso = await createCredential(http, { name: 'sso-null', sso_provider: null });
      expect(nullSso.sso_provider).toBeNull();
    });

    it.each([
      ['no name', { name: undefined }, 'body.name'],
      ['an empty name', { name: '  ' }, 'body.name'],
      ['a 256-character name', { name: 'n'.repeat(256) }, 'body.name'],
      ['a control character in the name', { name: 'a\tb' }, 'body.name'],
      ['the name ".."', { name: '..' }, 'body.name'],
      ['a name shaped like an id', { name: 'cred_abcdefghijklmnopqrstuvwx' }, 'body.name'],
      ['no domain', { domain: undefined }, 'body.domain'],
      ['a URL as domain', { domain: 'https://example.com' }, 'body.domain'],
      ['a domain with a path', { domain: 'example.com/login' }, 'body.domain'],
      ['a domain with a port', { domain: 'example.com:8443' }, 'body.domain'],
      ['a wildcard domain', { domain: '*.example.com' }, 'body.domain'],
      ['a domain with an empty label', { domain: 'example..com' }, 'body.domain'],
      ['a domain label starting with a dash', { domain: '-bad.example.com' }, 'body.domain'],
      ['a domain with an underscore', { domain: 'bad_host.example.com' }, 'body.domain'],
      ['a 64-character domain label', { domain: `${'a'.repeat(64)}.com` }, 'body.domain'],
      ['no values', { values: undefined }, 'body.values'],
      ['empty values', { values: {} }, 'body.values'],
      ['values as an array', { values: ['p'] }, 'body.values'],
      ['a non-string value', { values: { pin: 1234 } }, 'body.values.pin'],
      ['a value over 4096 characters', { values: { password: 'x'.repeat(4097) } }, 'body.values.password'],
      ['65 values', { values: Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`k${i}`, 'v'])) }, 'body.values'],
      ['an empty value name', { values: { '': 'v' } }, 'body.values'],
      ['a value name with a control character', { values: { 'a\nb': 'v' } }, 'body.values'],
      ['a value name with surrounding spaces', { values: { ' username': 'v' } }, 'body.values'],
      ['a value name over 128 characters', { values: { ['k'.repeat(129)]: 'v' } }, 'body.values'],
      ['a non-string SSO provider', { sso_provider: 7 }, 'body.sso_provider'],
      ['a 65-character SSO provider', { sso_provider: 's'.repeat(65) }, 'body.sso_provider'],
      ['a TOTP secret that is not base32', { totp_secret: 'JBSWY3DPEHPK3PX1' }, 'body.totp_secret'],
      ['a TOTP secret under 16 characters', { totp_secret: 'JBSWY3DPEHPK3PX' }, 'body.totp_secret'],
      ['a TOTP secret over 128 characters', { totp_secret: 'A'.repeat(129) }, 'body.totp_secret'],
      ['a non-string TOTP secret', { totp_secret: 123456 }, 'body.totp_secret'],
      ['an unknown field', { username: 'u' }, 'body'],
    ])('refuses %s with 400 naming the field, and stores nothing', async (_case, change, field) => {
      const before = await allCredentials(http);
      const body: Record<string, unknown> = { name: 'refused', domain: 'example.com', values: { u: 'v' }, ...change };
      const res = await http.post('/credentials', body);
      expect(res.status, res.text).toBe(400);
      expect(res.body.code).toBe('invalid_request');
      expect(errorFields(res).some((f) => f === field || f.startsWith(`${field}.`)), JSON.stringify(errorFields(res))).toBe(
        true,
      );
      expect(await allCredentials(http)).toEqual(before);
    });

    it('refuses "__proto__" as a value name instead of dropping it silently', async () => {
      const res = await http.post('/credentials', '{"name":"proto","domain":"example.com","values":{"__proto__":"x","a":"b"}}');
      expect(res.status, res.text).toBe(400);
      expect(errorFields(res)).toContain('body.values.__proto__');
    });

    it('refuses a duplicate name case- and accent-insensitively with a 409 that must not be retried', async () => {
      await createCredential(http, { name: 'Équipe Login' });
      for (const name of ['Équipe Login', 'equipe login', ' EQUIPE LOGIN ']) {
        const res = await http.post('/credentials', { name, domain: 'other.example', values: { a: 'b' } });
        expect(res.status, name).toBe(409);
        expect(res.body.code).toBe('credential_name_taken');
        expect(res.headers.get('x-should-retry')).toBe('false');
      }
      expect((await allCredentials(http, '&query=equipe')).length).toBe(1);
    });

    it('allows the same name in another project of the org', async () => {
      await createCredential(http, { name: 'shared-name' });
      const other = await inNewProject('credentials-second');
      const again = await createCredential(other.http, { name: 'shared-name' });
      expect(again.name).toBe('shared-name');
    });
  });

  describe('retrieve', () => {
    it('finds a credential by id and by name, case-insensitively, with the same body', async () => {
      const created = await createCredential(http, { name: 'Lookup Me', sso_provider: 'github' });
      const byId = await http.get(`/credentials/${created.id}`);
      const byName = await http.get(`/credentials/${encodeURIComponent('lookup me')}`);
      expect(byId.status).toBe(200);
      expect(byId.body).toEqual(created);
      expect(byName.body).toEqual(created);
    });

    it('finds a name containing a slash when it is percent-encoded', async () => {
      const created = await createCredential(http, { name: 'team/login' });
      const res = await http.get(`/credentials/${encodeURIComponent('team/login')}`);
      expect(res.status).toBe(200);
      expect(res.body.id).toBe(created.id);
    });

    it('answers 404 not_found for an unknown id or name', async () => {
      for (const ref of ['cred_aaaaaaaaaaaaaaaaaaaaaaaa', 'no-such-credential']) {
        const res = await http.get(`/credentials/${ref}`);
        expect(res.status).toBe(404);
        expect(res.body.code).toBe('not_found');
      }
    });
  });

  describe('list', () => {
    let listing: { http: HttpClient; created: Credential[] };

    beforeAll(async () => {
      const { http: scoped } = await inNewProject('credentials-list');
      const created: Credential[] = [];
      for (const [name, domain] of [
        ['Alpha Mail', 'mail.example.com'],
        ['beta-bank', 'bank.example.org'],
        ['Gamma', 'EXAMPLE.com'],
      ] as const) {
        created.push(await createCredential(scoped, { name, domain }));
        clock.advance(1000);
      }
      listing = { http: scoped, created };
    });

    it('lists newest first without value names, with the pagination headers', async () => {
      const res = await listing.http.get('/credentials');
      expect(res.status).toBe(200);
      expect(namesOf(res.body)).toEqual(['Gamma', 'beta-bank', 'Alpha Mail']);
      for (const item of res.body as Credential[]) {
        expect(item).not.toHaveProperty('value_keys');
        expect(item.has_values).toBe(true);
      }
      expect(res.headers.get('x-has-more')).toBe('false');
      expect(res.headers.get('x-next-offset')).toBe('0');
    });

    it('pages with limit and offset', async () => {
      const first = await listing.http.get('/credentials?limit=2');
      expect(namesOf(first.body)).toEqual(['Gamma', 'beta-bank']);
      expect(first.headers.get('x-has-more')).toBe('true');
      expect(first.headers.get('x-next-offset')).toBe('2');
      const second = await listing.http.get('/credentials?limit=2&offset=2');
      expect(namesOf(second.body)).toEqual(['Alpha Mail']);
      expect(second.headers.get('x-has-more')).toBe('false');
    });

    it('filters by exact domain after normalising it', async () => {
      expect(namesOf(await allCredentials(listing.http, '&domain=Example.COM'))).toEqual(['Gamma']);
      expect(namesOf(await allCredentials(listing.http, '&domain=example.org'))).toEqual([]);
    });

    it('searches names and domains by case-insensitive substring and ids exactly', async () => {
      expect(namesOf(await allCredentials(listing.http, '&query=ALPHA'))).toEqual(['Alpha Mail']);
      expect(namesOf(await allCredentials(listing.http, '&query=bank.example'))).toEqual(['beta-bank']);
      expect(namesOf(await allCredentials(listing.http, '&query=example'))).toEqual(['Gamma', 'beta-bank', 'Alpha Mail']);
      expect(namesOf(await allCredentials(listing.http, '&query=%25'))).toEqual([]);
      const gamma = listing.created[2]!;
      expect(namesOf(await allCredentials(listing.http, `&query=${gamma.id}`))).toEqual(['Gamma']);
      expect(namesOf(await allCredentials(listing.http, `&query=${gamma.id.slice(0, -1)}`))).toEqual([]);
    });

    it.each([
      ['limit=0', 'query.limit'],
      ['limit=101', 'query.limit'],
      ['offset=-1', 'query.offset'],
      ['domain=https%3A%2F%2Fexample.com', 'query.domain'],
    ])('refuses %s with 400', async (query, field) => {
      const res = await listing.http.get(`/credentials?${query}`);
      expect(res.status).toBe(400);
      expect(errorFields(res)).toContain(field);
    });
  });

  describe('delete', () => {
    it('deletes by id; the credential is then 404 everywhere and its name is free again', async () => {
      const created = await createCredential(http, { name: 'doomed', totp_secret: 'JBSWY3DPEHPK3PXP' });
      const res = await http.delete(`/credentials/${created.id}`);
      expect(res.status).toBe(204);
      expect(res.text).toBe('');
      for (const gone of [
        http.get(`/credentials/${created.id}`),
        http.get('/credentials/doomed'),
        http.patch(`/credentials/${created.id}`, { name: 'revived' }),
        http.get(`/credentials/${created.id}/totp-code`),
        http.delete(`/credentials/${created.id}`),
      ]) {
        expect((await gone).status).toBe(404);
      }
      expect(namesOf(await allCredentials(http))).not.toContain('doomed');
      const again = await createCredential(http, { name: 'doomed' });
      expect(again.id).not.toBe(created.id);
    });

    it('deletes by name, case-insensitively, and removes the row with its secrets', async () => {
      const created = await createCredential(http, { name: 'Delete By Name' });
      expect((await http.delete('/credentials/delete%20by%20name')).status).toBe(204);
      const { rows } = await app.database.db.query('SELECT 1 FROM credentials WHERE id = $1', [created.id]);
      expect(rows).toEqual([]);
    });
  });

  describe('project deletion', () => {
    it('is refused while the project holds credentials, and allowed once they are deleted', async () => {
      const { project, http: scoped } = await inNewProject('credentials-blocking');
      const created = await createCredential(scoped, { name: 'keeps-project' });
      const refused = await http.delete(`/org/projects/${project.id}`);
      expect(refused.status).toBe(409);
      expect(refused.body.code).toBe('project_not_empty');
      expect(refused.body.details).toContainEqual(expect.objectContaining({ field: 'credentials' }));
      expect((await scoped.delete(`/credentials/${created.id}`)).status).toBe(204);
      expect((await http.delete(`/org/projects/${project.id}`)).status).toBe(204);
    });
  });
});
