import type Kernel from '@onkernel/sdk';
import { APIError, BadRequestError, ConflictError, NotFoundError, PermissionDeniedError } from '@onkernel/sdk';
import type { CredentialProvider } from '@onkernel/sdk/resources/credential-providers';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PASSWORD, startLoginSites, USERNAME, type LoginSites } from '../fixtures/login-sites/server.js';
import { startConnectStandIn, type ConnectStandIn } from '../fixtures/onepassword-connect.js';
import { eventually } from '../support/eventually.js';
import { cleanupServices, collect, startService, type RunningService } from '../support/service.js';
import { detailFields, rejection, unique } from './support/sdk.js';

/**
 * Credential providers through @onkernel/sdk against the built service, whose default
 * Connect server (BROWSERPLANE_ONEPASSWORD_CONNECT_URL) is a local stand-in for 1Password
 * Connect (test/fixtures/onepassword-connect.ts): the real Connect server cannot run here,
 * so the stand-in serves its documented JSON. The SDK's create sends no connect_url; the
 * service's default is what makes it work unchanged.
 */

let service: RunningService;
let admin: Kernel;
let connect: ConnectStandIn;
let sites: LoginSites;

beforeAll(async () => {
  sites = await startLoginSites();
  connect = await startConnectStandIn([
    { name: 'Private', items: [{ title: 'Single', urls: [sites.url('single', '/login')], username: USERNAME, password: PASSWORD }] },
    { name: 'Shared', items: [{ title: 'Other', urls: ['https://other.example'], username: 'o', password: 'o-pw' }] },
  ]);
  service = await startService({ env: { BROWSERPLANE_ONEPASSWORD_CONNECT_URL: connect.url } });
  admin = service.client();
}, 120_000);
afterAll(async () => {
  await cleanupServices();
  await connect?.close();
  await sites?.close();
});

const create = (overrides: Partial<Parameters<Kernel['credentialProviders']['create']>[0]> = {}) =>
  admin.credentialProviders.create({ name: unique('op'), provider_type: 'onepassword', token: connect.token, ...overrides });

describe('credential providers through the SDK', () => {
  it('creates, retrieves, lists, updates and deletes a provider; the token never comes back', async () => {
    const name = unique('my-1p');
    const created = await create({ name, cache_ttl_seconds: 120 });
    expect(created).toEqual({
      id: expect.stringMatching(/^cpr_/),
      name,
      provider_type: 'onepassword',
      enabled: true,
      priority: 0,
      created_at: expect.any(String),
      updated_at: created.created_at,
      // Ours beside the SDK's fields: the server it talks to and its cache lifetime.
      ...{ connect_url: connect.url, cache_ttl_seconds: 120 },
    } satisfies CredentialProvider);
    expect(await admin.credentialProviders.retrieve(created.id)).toEqual(created);
    expect(await admin.credentialProviders.retrieve(name)).toEqual(created);
    const listed = await collect(admin.credentialProviders.list({ query: name }));
    expect(listed.map((p) => p.id)).toEqual([created.id]);

    const updated = await admin.credentialProviders.update(created.id, { enabled: false, priority: 3, name: `${name}-renamed`, cache_ttl_seconds: 0 });
    expect(updated).toMatchObject({ id: created.id, enabled: false, priority: 3, name: `${name}-renamed` });
    for (const shown of [created, updated, ...listed]) expect(JSON.stringify(shown)).not.toContain(connect.token);

    await admin.credentialProviders.delete(created.id);
    await rejection(admin.credentialProviders.retrieve(created.id), NotFoundError);
    await rejection(admin.credentialProviders.delete(created.id), NotFoundError);
  });

  it('refuses bad input and duplicates with the SDK’s error classes', async () => {
    const bad = await rejection(create({ provider_type: 'bitwarden' as 'onepassword', name: '  ' }), BadRequestError);
    expect(detailFields(bad)).toEqual(['body.name', 'body.provider_type']);
    await rejection(create({ cache_ttl_seconds: -5 }), BadRequestError);
    const taken = await create();
    await rejection(create({ name: taken.name }), ConflictError);
    await rejection(admin.credentialProviders.update(taken.id, { priority: 1.5 }), BadRequestError);
  });

  it('tests the token: vaults on success, success false with the error on a wrong token', async () => {
    const good = await create();
    expect(await admin.credentialProviders.test(good.id)).toEqual({
      success: true,
      vaults: connect.vaults.map(({ id, name }) => ({ id, name })),
    });
    const wrong = await create({ token: 'not-the-token' });
    const result = await admin.credentialProviders.test(wrong.id);
    expect(result).toMatchObject({ success: false, vaults: [] });
    expect(result.error).toContain('401');
  });

  it('lists items across vaults with their paths; a wrong token is a server error', async () => {
    const provider = await create();
    const { items } = await admin.credentialProviders.listItems(provider.id);
    expect(items?.map((i) => [i.path, i.vault_name, i.urls])).toEqual([
      ['Private/Single', 'Private', [sites.url('single', '/login')]],
      ['Shared/Other', 'Shared', ['https://other.example']],
    ]);
    const wrong = await create({ token: 'not-the-token' });
    // 424: the request was fine, the Connect server it depends on refused it.
    const failed = await rejection(admin.credentialProviders.listItems(wrong.id), APIError);
    expect(failed.status).toBe(424);
    expect(failed.error).toMatchObject({ code: 'credential_provider_error' });
  });

  it('refuses a project-scoped key (403) and another org’s key sees nothing (404)', async () => {
    const provider = await create();
    const project = await admin.projects.create({ name: unique('scoped') });
    const key = await admin.apiKeys.create({ name: unique('scoped-key'), project_id: project.id });
    const scoped = service.client(key.key);
    await rejection(scoped.credentialProviders.retrieve(provider.id), PermissionDeniedError);
    await rejection(collect(scoped.credentialProviders.list()), PermissionDeniedError);
    await rejection(scoped.credentialProviders.test(provider.id), PermissionDeniedError);
  });

  it('a managed-auth login fills the provider item’s username and password; no credential is stored', async () => {
    const provider = await create();
    const connection = await admin.auth.connections.create({
      domain: sites.domain('single'),
      profile_name: unique('provider-login'),
      login_url: sites.url('single', '/login'),
      health_checks: false,
      credential: { provider: provider.name, path: 'Private/Single' },
    });
    await admin.auth.connections.login(connection.id);
    const done = await eventually(
      async () => {
        const state = await admin.auth.connections.retrieve(connection.id);
        return state.flow_status && state.flow_status !== 'IN_PROGRESS' ? state : undefined;
      },
      { timeoutMs: 90_000, intervalMs: 250, what: 'the end of the login' },
    );
    expect(done).toMatchObject({ flow_status: 'SUCCESS', status: 'AUTHENTICATED', can_reauth_reason: 'external_credential' });
    expect(await collect(admin.credentials.list())).toEqual([]);
  }, 120_000);
});
