import type Kernel from '@onkernel/sdk';
import { ConflictError, NotFoundError } from '@onkernel/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PASSWORD, startLoginSites, USERNAME, type LoginSites } from '../fixtures/login-sites/server.js';
import { unique } from './support/sdk.js';
import { cleanupServices, startService, type RunningService } from './support/service.js';

/**
 * Managed auth through the official SDK against the built service: a connection, a login
 * followed over the SDK's SSE decoder and answered with submit, the timeline, and the
 * CRUD calls as the SDK sends them. The website is the local fixture (real Chromium in
 * the service drives it); each login shape has its own tests in
 * test/integration/auth-flows.test.ts.
 */

let service: RunningService;
let kernel: Kernel;
let sites: LoginSites;

beforeAll(async () => {
  sites = await startLoginSites();
  service = await startService();
  kernel = service.client();
});
afterAll(async () => {
  await cleanupServices();
  await sites?.close();
});

describe('managed auth through the SDK', () => {
  it('logs in: follow shows every state, submit answers the step, the stream ends at SUCCESS', async () => {
    const profile = unique('auth-profile');
    const created = await kernel.auth.connections.create({
      domain: sites.domain('single'),
      profile_name: profile,
      login_url: sites.url('single', '/login'),
      health_checks: false,
    });
    expect(created).toMatchObject({ domain: sites.domain('single'), profile_name: profile, status: 'NEEDS_AUTH', save_credentials: true, record_session: false });
    await expect(kernel.auth.connections.create({ domain: sites.domain('single'), profile_name: profile })).rejects.toBeInstanceOf(ConflictError);

    const started = await kernel.auth.connections.login(created.id);
    expect(started).toMatchObject({ flow_type: 'LOGIN', hosted_url: expect.stringContaining('#code='), live_view_url: expect.any(String) });

    const stream = await kernel.auth.connections.follow(created.id);
    const seen: string[] = [];
    for await (const event of stream) {
      if (event.event !== 'managed_auth_state') continue;
      seen.push(`${event.flow_status}/${event.flow_step}`);
      if (event.flow_step === 'AWAITING_INPUT' && event.fields) {
        const values: Record<string, string> = {};
        for (const field of event.fields) values[field.id] = field.type === 'password' ? PASSWORD : USERNAME;
        const answer = await kernel.auth.connections.submit(created.id, { field_values: values });
        expect(answer).toEqual({ accepted: true });
      }
    }
    expect(seen).toContain('IN_PROGRESS/AWAITING_INPUT');
    expect(seen.at(-1)).toBe('SUCCESS/COMPLETED');

    const after = await kernel.auth.connections.retrieve(created.id);
    expect(after).toMatchObject({ status: 'AUTHENTICATED', flow_status: 'SUCCESS', post_login_url: sites.url('single', '/account') });
    const timeline = [];
    for await (const entry of kernel.auth.connections.timeline(created.id)) timeline.push(entry);
    expect(timeline).toEqual([expect.objectContaining({ id: started.id, type: 'login', status: 'SUCCESS' })]);
  }, 180_000);

  it('updates, lists with filters, and deletes', async () => {
    const profile = unique('auth-list');
    const created = await kernel.auth.connections.create({ domain: sites.domain('twostep'), profile_name: profile, health_checks: false });
    const updated = await kernel.auth.connections.update(created.id, { allowed_domains: [sites.idpHost], login_url: sites.url('twostep', '/login') });
    expect(updated).toMatchObject({ allowed_domains: [sites.idpHost], login_url: sites.url('twostep', '/login'), health_checks: false });
    const listed = [];
    for await (const item of kernel.auth.connections.list({ profile_name: profile })) listed.push(item.id);
    expect(listed).toEqual([created.id]);
    await kernel.auth.connections.delete(created.id);
    await expect(kernel.auth.connections.retrieve(created.id)).rejects.toBeInstanceOf(NotFoundError);
  }, 60_000);
});
