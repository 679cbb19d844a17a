import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { FixedClock } from '../../api/src/clock.js';
import { CapturedLog } from '../support/captured-log.js';
import type { HttpClient, HttpResponse } from '../support/http.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { RFC6238_SECRET, createCredential, allCredentials } from './credentials.fixtures.js';

/** TOTP codes, encryption at rest, secrets kept out of responses and logs, tenant isolation. */
describe('credentials: secrets and isolation', () => {
  let app: TestApp;
  let http: HttpClient;
  const START = new Date('2026-06-01T00:00:00Z');
  const clock = new FixedClock(START);
  const captured = new CapturedLog();
  /** Every response body of this file, to search for leaked secrets. */
  const responses: string[] = [];

  const SECRET_PASSWORD = 'Pa55word-never-shown-9f3k';
  const SECRET_USER = 'user-never-shown-q7x2@example.com';
  const SECRET_TOTP = 'KRSXG5CTMVRXEZLUKRSXG5CTMVRXEZLU';

  const record = (res: HttpResponse) => {
    responses.push(res.text, JSON.stringify([...res.headers]));
    return res;
  };

  beforeAll(async () => {
    app = await startTestApp({ clock, log: captured.logger() });
    http = app.tenant.http;
  });
  afterAll(async () => app?.close());

  describe('totp-code', () => {
    afterEach(() => clock.set(START));

    it.each([
      [59, '287082', '1970-01-01T00:01:00.000Z'],
      [1111111109, '081804', '2005-03-18T01:58:30.000Z'],
      [1234567890, '005924', '2009-02-13T23:32:00.000Z'],
    ])('gives the RFC 6238 SHA-1 test vector at T=%i s, expiring at the end of the step', async (seconds, code, expires) => {
      const created = await createCredential(http, { name: `vector-${seconds}`, totp_secret: RFC6238_SECRET });
      clock.set(new Date(seconds * 1000));
      const res = await http.get(`/credentials/${created.id}/totp-code`);
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ code, expires_at: expires });
    });

    it('includes the current code in the create response when a secret is set', async () => {
      clock.set(new Date(59_000));
      const created = await createCredential(http, { name: 'create-with-code', totp_secret: RFC6238_SECRET.toLowerCase() });
      expect(created).toMatchObject({
        has_totp_secret: true,
        totp_code: '287082',
        totp_code_expires_at: '1970-01-01T00:01:00.000Z',
      });
      // Only the response that set the secret carries a code.
      expect((await http.get(`/credentials/${created.id}`)).body).not.toHaveProperty('totp_code');
      expect((await http.get('/credentials?limit=100')).text).not.toContain('totp_code');
    });

    it('moves to a new code at the step boundary', async () => {
      const created = await createCredential(http, { name: 'steps', totp_secret: SECRET_TOTP });
      clock.set(new Date('2026-06-01T00:00:29.999Z'));
      const before = (await http.get(`/credentials/${created.name}/totp-code`)).body;
      clock.set(new Date('2026-06-01T00:00:30.000Z'));
      const after = (await http.get(`/credentials/${created.name}/totp-code`)).body;
      expect(before.expires_at).toBe('2026-06-01T00:00:30.000Z');
      expect(after.expires_at).toBe('2026-06-01T00:01:00.000Z');
      expect(after.code).not.toBe(before.code);
    });

    it('answers 409 totp_not_configured, not to be retried, for a credential without a secret', async () => {
      const created = await createCredential(http, { name: 'no-totp' });
      const res = await http.get(`/credentials/${created.id}/totp-code`);
      expect(res.status).toBe(409);
      expect(res.body.code).toBe('totp_not_configured');
      expect(res.headers.get('x-should-retry')).toBe('false');
    });

    it('answers 404 for an unknown credential', async () => {
      const res = await http.get('/credentials/nothing-here/totp-code');
      expect(res.status).toBe(404);
      expect(res.body.code).toBe('not_found');
    });
  });

  describe('encryption at rest', () => {
    it('keeps neither the values nor the TOTP secret in plaintext in the table', async () => {
      const created = await createCredential(http, {
        name: 'at-rest',
        values: { username: SECRET_USER, password: SECRET_PASSWORD },
        totp_secret: SECRET_TOTP.toLowerCase(),
      });
      record(await http.patch(`/credentials/${created.id}`, { values: { recovery: `${SECRET_PASSWORD}-2` } }));
      const { rows } = await app.database.db.query<{ dump: string }>('SELECT row_to_json(c)::text AS dump FROM credentials c');
      const dump = rows.map((r) => r.dump).join('\n');
      expect(dump).toContain(created.id);
      for (const secret of [SECRET_USER, SECRET_PASSWORD, SECRET_TOTP, SECRET_TOTP.toLowerCase()]) {
        expect(dump).not.toContain(secret);
      }
      for (const secret of ['Pa55word', Buffer.from(SECRET_PASSWORD).toString('base64').slice(0, 12)]) {
        expect(dump).not.toContain(secret);
      }
    });

    it('binds each sealed column to its row and field', async () => {
      const a = await createCredential(http, { name: 'sealed-a', values: { password: SECRET_PASSWORD }, totp_secret: SECRET_TOTP });
      const b = await createCredential(http, { name: 'sealed-b' });
      const { rows } = await app.database.db.query<{ id: string; values_sealed: string; totp_secret_sealed: string }>(
        'SELECT id, values_sealed, totp_secret_sealed FROM credentials WHERE id = $1',
        [a.id],
      );
      const row = rows[0]!;
      const { sealer } = app.deps;
      expect(JSON.parse(sealer.open(row.values_sealed, `credential:${a.id}:values`))).toEqual({ password: SECRET_PASSWORD });
      expect(sealer.open(row.totp_secret_sealed, `credential:${a.id}:totp`)).toBe(SECRET_TOTP);
      expect(() => sealer.open(row.values_sealed, `credential:${b.id}:values`)).toThrow();
      expect(() => sealer.open(row.totp_secret_sealed, `credential:${a.id}:values`)).toThrow();
    });
  });

  describe('secrets never leave the service', () => {
    it('puts no value or TOTP secret in any response or log line, errors included', async () => {
      const created = await createCredential(http, {
        name: 'leak-check',
        values: { username: SECRET_USER, password: SECRET_PASSWORD },
        totp_secret: SECRET_TOTP,
      });
      const ref = created.id;
      record(await http.get(`/credentials/${ref}`));
      record(await http.get('/credentials/leak-check'));
      record(await http.get('/credentials?limit=100'));
      record(await http.get(`/credentials?query=${encodeURIComponent('leak')}`));
      record(await http.patch(`/credentials/${ref}`, { values: { password: SECRET_PASSWORD }, totp_secret: SECRET_TOTP }));
      record(await http.get(`/credentials/${ref}/totp-code`));
      // Refused requests carrying the secrets.
      record(await http.post('/credentials', { name: 'leak-check', domain: 'example.com', values: { password: SECRET_PASSWORD } }));
      record(await http.post('/credentials', { name: 'x', domain: 'bad domain', values: { password: SECRET_PASSWORD }, totp_secret: `${SECRET_TOTP}!` }));
      record(await http.patch(`/credentials/${ref}`, { values: { password: `${SECRET_PASSWORD}${'x'.repeat(5000)}` } }));
      record(await http.patch(`/credentials/${ref}`, { totp_secret: `1${SECRET_TOTP}` }));
      record(await http.post('/credentials', `{"name":"x","values":{"password":"${SECRET_PASSWORD}"`));

      expect(captured.lines.length).toBeGreaterThan(5);
      const everything = [...responses, ...captured.lines].join('\n');
      for (const secret of [SECRET_USER, SECRET_PASSWORD, SECRET_TOTP]) {
        expect(everything).not.toContain(secret);
      }
    });
  });

  describe('tenant and project isolation', () => {
    const attempts = (other: HttpClient, ref: string) => [
      other.get(`/credentials/${encodeURIComponent(ref)}`),
      other.patch(`/credentials/${encodeURIComponent(ref)}`, { values: { password: 'hijacked' } }),
      other.get(`/credentials/${encodeURIComponent(ref)}/totp-code`),
      other.delete(`/credentials/${encodeURIComponent(ref)}`),
    ];

    it('answers 404 to another org for every endpoint, by id and by name, and lists nothing of ours', async () => {
      const mine = await createCredential(http, { name: 'org-private', totp_secret: SECRET_TOTP });
      const other = await app.newTenant('intruder');
      for (const ref of [mine.id, mine.name]) {
        for (const res of await Promise.all(attempts(other.http, ref))) {
          expect(res.status).toBe(404);
          expect(res.body.code).toBe('not_found');
        }
      }
      expect(await allCredentials(other.http)).toEqual([]);
      expect(await allCredentials(other.http, `&query=${mine.id}`)).toEqual([]);
      const { totp_code: _c, totp_code_expires_at: _e, ...shown } = mine;
      expect((await http.get(`/credentials/${mine.id}`)).body).toEqual(shown);
      // The other org may use the same name.
      expect((await createCredential(other.http, { name: 'org-private' })).id).not.toBe(mine.id);
    });

    it('answers 404 from another project of the same org, through the header or a project key', async () => {
      const mine = await createCredential(http, { name: 'project-private', totp_secret: SECRET_TOTP });
      const project = (await http.post('/org/projects', { name: 'isolated-project' })).body as { id: string };
      const key = (await http.post('/org/api_keys', { name: 'isolated', project_id: project.id })).body as { key: string };
      const viaHeader = http.withHeaders({ 'X-Kernel-Project-Id': project.id });
      const viaKey = app.client(key.key);
      for (const other of [viaHeader, viaKey]) {
        for (const ref of [mine.id, mine.name]) {
          for (const res of await Promise.all(attempts(other, ref))) expect(res.status).toBe(404);
        }
        expect(await allCredentials(other)).toEqual([]);
      }
      const theirs = await createCredential(viaKey, { name: 'in-their-project' });
      expect((await http.get(`/credentials/${theirs.id}`)).status).toBe(404);
      expect((await viaHeader.get(`/credentials/${theirs.id}`)).status).toBe(200);
      expect((await http.get(`/credentials/${mine.id}`)).status).toBe(200);
    });
  });
});
