import { createHmac } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FixedClock } from '../../api/src/clock.js';
import type { HttpClient } from '../support/http.js';
import { startTestApp, type TestApp } from '../support/test-app.js';

const SECRET = 'JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP';

/** RFC 6238 written out here, independent of the service's TOTP library. */
function referenceTotp(secretBase32: string, at: Date, algorithm: string, digits: number, period: number): string {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';
  let bits = '';
  for (const char of secretBase32) bits += alphabet.indexOf(char).toString(2).padStart(5, '0');
  const key = Buffer.from(bits.match(/.{8}/g)!.map((byte) => parseInt(byte, 2)));
  const counter = Buffer.alloc(8);
  counter.writeBigUInt64BE(BigInt(Math.floor(at.getTime() / 1000 / period)));
  const mac = createHmac(algorithm.toLowerCase(), key).update(counter).digest();
  const offset = mac[mac.length - 1]! & 0x0f;
  const binary = mac.readUInt32BE(offset) & 0x7fffffff;
  return String(binary % 10 ** digits).padStart(digits, '0');
}

describe('credentials: totp_algorithm, totp_digits, totp_period', () => {
  let app: TestApp;
  let http: HttpClient;
  const clock = new FixedClock(new Date('2026-06-01T00:00:07Z'));

  beforeAll(async () => {
    app = await startTestApp({ clock });
    http = app.tenant.http;
  });
  afterAll(async () => app?.close());

  let seq = 0;
  const create = (body: Record<string, unknown> = {}) =>
    http.post('/credentials', { name: `totp-${++seq}`, domain: 'example.com', values: { username: 'u' }, totp_secret: SECRET, ...body });
  const rowCount = async () =>
    (await app.database.db.query<{ n: number }>('SELECT count(*)::int AS n FROM credentials WHERE project_id = $1', [app.tenant.defaultProjectId]))
      .rows[0]!.n;

  it.each([
    ['SHA1', 6, 30],
    ['SHA256', 8, 60],
    ['SHA512', 7, 15],
  ] as const)('makes %s codes of %d digits every %d s, as RFC 6238 computes them', async (algorithm, digits, period) => {
    const res = await create({ totp_algorithm: algorithm, totp_digits: digits, totp_period: period });
    expect(res.status, res.text).toBe(200);
    const now = clock.now();
    expect(res.body).toMatchObject({ totp_algorithm: algorithm, totp_digits: digits, totp_period: period });
    expect(res.body.totp_code).toBe(referenceTotp(SECRET, now, algorithm, digits, period));
    const stepEnd = new Date((Math.floor(now.getTime() / 1000 / period) + 1) * period * 1000);
    expect(res.body.totp_code_expires_at).toBe(stepEnd.toISOString());

    const code = await http.get(`/credentials/${res.body.id}/totp-code`);
    expect(code.body).toEqual({ code: referenceTotp(SECRET, now, algorithm, digits, period), expires_at: stepEnd.toISOString() });
    expect((await http.get(`/credentials/${res.body.id}`)).body).toMatchObject({ totp_algorithm: algorithm, totp_digits: digits, totp_period: period });
  });

  it('keeps the RFC 6238 defaults when none are sent', async () => {
    const res = await create();
    expect(res.body).toMatchObject({ totp_algorithm: 'SHA1', totp_digits: 6, totp_period: 30 });
    expect(res.body.totp_code).toBe(referenceTotp(SECRET, clock.now(), 'SHA1', 6, 30));
  });

  it('changes the options alone with PATCH and answers with the code they make', async () => {
    const created = await create();
    const res = await http.patch(`/credentials/${created.body.id}`, { totp_algorithm: 'SHA512', totp_digits: 8 });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toMatchObject({ totp_algorithm: 'SHA512', totp_digits: 8, totp_period: 30 });
    expect(res.body.totp_code).toBe(referenceTotp(SECRET, clock.now(), 'SHA512', 8, 30));
    expect((await http.get(`/credentials/${created.body.id}/totp-code`)).body.code).toBe(res.body.totp_code);
  });

  it.each([
    [{ totp_algorithm: 'MD5' }, 'body.totp_algorithm'],
    [{ totp_algorithm: 'sha1' }, 'body.totp_algorithm'],
    [{ totp_digits: 5 }, 'body.totp_digits'],
    [{ totp_digits: 9 }, 'body.totp_digits'],
    [{ totp_digits: 6.5 }, 'body.totp_digits'],
    [{ totp_period: 9 }, 'body.totp_period'],
    [{ totp_period: 301 }, 'body.totp_period'],
    [{ totp_period: '30' }, 'body.totp_period'],
  ])('refuses %j with 400 naming the field, and stores nothing', async (bad, field) => {
    const before = await rowCount();
    const res = await create(bad);
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({ code: 'invalid_request', details: [expect.objectContaining({ field })] });
    expect(await rowCount()).toBe(before);
  });

  it('refuses bad options on PATCH and leaves the credential as it was', async () => {
    const created = await create({ totp_digits: 7 });
    const res = await http.patch(`/credentials/${created.body.id}`, { totp_digits: 10, name: 'renamed-by-bad-patch' });
    expect(res.status).toBe(400);
    const after = await http.get(`/credentials/${created.body.id}`);
    expect(after.body).toMatchObject({ name: created.body.name, totp_digits: 7, updated_at: created.body.updated_at });
  });
});
