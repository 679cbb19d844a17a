import { readFile } from 'node:fs/promises';
import path from 'node:path';
import type Kernel from '@onkernel/sdk';
import { BadRequestError, ConflictError, NotFoundError } from '@onkernel/sdk';
import type { Credential } from '@onkernel/sdk/resources/credentials';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { detailFields, rejection, unique } from './support/sdk.js';
import { cleanupServices, collect, startService, type RunningService } from '../support/service.js';

/** RFC 6238 Appendix B's SHA-1 seed, in base32. */
const RFC6238_SECRET = 'GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ';
const PASSWORD = 'e2e-password-never-returned-4kq9';

let service: RunningService;
let admin: Kernel;

beforeAll(async () => {
  service = await startService();
  admin = service.client();
});
afterAll(cleanupServices);

const create = (overrides: Partial<Parameters<Kernel['credentials']['create']>[0]> = {}) =>
  admin.credentials.create({
    name: unique('cred'),
    domain: 'login.example.com',
    values: { username: 'e2e-user', password: PASSWORD },
    ...overrides,
  });

describe('credentials through the SDK', () => {
  it('creates a credential and shows its value names, never its values', async () => {
    const name = unique('shape');
    const created = await create({ name, sso_provider: 'google' });
    expect(created).toEqual({
      id: expect.stringMatching(/^cred_/),
      name,
      domain: 'login.example.com',
      created_at: expect.any(String),
      updated_at: created.created_at,
      has_values: true,
      has_totp_secret: false,
      sso_provider: 'google',
      value_keys: ['username', 'password'],
      // Newer SDKs' fields, which 0.84's Credential type does not name.
      ...{ totp_algorithm: 'SHA1', totp_digits: 6, totp_period: 30 },
    } satisfies Credential);
    expect(JSON.stringify(created)).not.toContain(PASSWORD);
  });

  it('returns a TOTP code from create and from totpCode while the secret is set', async () => {
    const created = await create({ totp_secret: RFC6238_SECRET.toLowerCase() });
    expect(created.has_totp_secret).toBe(true);
    expect(created.totp_code).toMatch(/^\d{6}$/);
    const code = await admin.credentials.totpCode(created.name);
    expect(code.code).toMatch(/^\d{6}$/);
    const expiresIn = Date.parse(code.expires_at) - Date.now();
    expect(expiresIn).toBeGreaterThan(-5_000);
    expect(expiresIn).toBeLessThanOrEqual(30_000);
    expect(Date.parse(code.expires_at) % 30_000).toBe(0);
  });

  it('retrieves by id and by name', async () => {
    const created = await create();
    expect(await admin.credentials.retrieve(created.id)).toEqual(created);
    expect(await admin.credentials.retrieve(created.name)).toEqual(created);
  });

  it('updates with removals first, then the merge, and sets and removes the TOTP secret', async () => {
    const created = await create({ values: { username: 'u', password: 'p', pin: '1' } });
    const updated = await admin.credentials.update(created.id, {
      remove_value_keys: ['pin', 'password', 'absent'],
      values: { password: 'new', email: 'e@example.com' },
      totp_secret: 'gezd gnbv gy3t qojq gezd gnbv gy3t qojq',
      sso_provider: 'github',
    });
    expect(updated).toMatchObject({
      value_keys: ['username', 'password', 'email'],
      has_totp_secret: true,
      totp_code: expect.stringMatching(/^\d{6}$/),
      sso_provider: 'github',
    });
    const cleared = await admin.credentials.update(created.name, { totp_secret: '', sso_provider: null });
    expect(cleared).toMatchObject({ has_totp_secret: false, sso_provider: null });
    expect(cleared).not.toHaveProperty('totp_code');
  });

  it('lists with domain and query filters, without value names, across pages', async () => {
    const domain = `${unique('list')}.example.com`;
    const made = [await create({ domain }), await create({ domain }), await create({ domain })];
    const listed = await collect(admin.credentials.list({ domain, limit: 2 }));
    expect(listed.map((c) => c.id).sort()).toEqual(made.map((c) => c.id).sort());
    for (const item of listed) expect(item).not.toHaveProperty('value_keys');
    const byQuery = await collect(admin.credentials.list({ query: made[1]!.name.toUpperCase() }));
    expect(byQuery.map((c) => c.id)).toEqual([made[1]!.id]);
  });

  it('deletes by name; afterwards every call is NotFoundError and the name is free', async () => {
    const created = await create({ totp_secret: RFC6238_SECRET });
    await admin.credentials.delete(created.name);
    await rejection(admin.credentials.retrieve(created.id), NotFoundError);
    await rejection(admin.credentials.update(created.id, { name: unique('x') }), NotFoundError);
    await rejection(admin.credentials.totpCode(created.id), NotFoundError);
    await rejection(admin.credentials.delete(created.id), NotFoundError);
    expect((await create({ name: created.name })).id).not.toBe(created.id);
  });

  it('maps refusals to the SDK error classes', async () => {
    const invalid = await rejection(create({ domain: 'https://example.com/login', values: {} }), BadRequestError);
    expect(detailFields(invalid)).toEqual(['body.domain', 'body.values']);
    const badSecret = await rejection(create({ totp_secret: 'not-base32-1!' }), BadRequestError);
    expect(detailFields(badSecret)).toEqual(['body.totp_secret']);

    const taken = await create();
    const duplicate = await rejection(create({ name: taken.name }), ConflictError);
    expect(duplicate.error).toMatchObject({ code: 'credential_name_taken' });
    expect(duplicate.headers.get('x-should-retry')).toBe('false');

    const noTotp = await rejection(admin.credentials.totpCode(taken.id), ConflictError);
    expect(noTotp.error).toMatchObject({ code: 'totp_not_configured' });
    await rejection(admin.credentials.retrieve(unique('missing')), NotFoundError);
  });

  it('keeps credentials of one project out of another', async () => {
    const project = await admin.projects.create({ name: unique('other') });
    const scoped = service.client(undefined, { projectID: project.id });
    const mine = await create();
    await rejection(scoped.credentials.retrieve(mine.id), NotFoundError);
    const theirs = await scoped.credentials.create({ name: mine.name, domain: 'example.com', values: { a: 'b' } });
    await rejection(admin.credentials.retrieve(theirs.id), NotFoundError);
    expect((await collect(scoped.credentials.list())).map((c) => c.id)).toEqual([theirs.id]);
  });

  it('never writes a value into the service log', async () => {
    await create();
    const log = service.stdout.join('\n');
    expect(log).not.toContain(PASSWORD);
    expect(await readFile(path.join(service.dataDir, 'encryption-key'), 'utf8')).toMatch(/^\S{40,}\n$/);
  });
});
