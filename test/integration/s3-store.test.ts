import { ListObjectsV2Command } from '@aws-sdk/client-s3';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../api/src/clock.js';
import type { HttpClient } from '../support/http.js';
import { startMoto, type Moto } from '../support/moto.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { newProject } from './browsers.fixtures.js';
import { startStatePage, visit, type StatePage } from './browsers-profile.fixtures.js';
import { ReplayCalls, Video } from './replays.fixtures.js';

/**
 * The app with BROWSERPLANE_STORE=s3 against a real S3-compatible server (moto's,
 * test/support/moto.ts), real agents, Chromium and ffmpeg: a profile saved by one session
 * loads in the next, a replay downloads whole and by range, and another project's key
 * reaches neither. Credentials reach the SDK's default chain through the environment, as
 * in a deployment.
 */

let moto: Moto;
let app: TestApp;
let page: StatePage;
const savedEnv = { id: process.env.AWS_ACCESS_KEY_ID, secret: process.env.AWS_SECRET_ACCESS_KEY };

beforeAll(async () => {
  moto = await startMoto('browserplane-app');
  process.env.AWS_ACCESS_KEY_ID = moto.env.AWS_ACCESS_KEY_ID;
  process.env.AWS_SECRET_ACCESS_KEY = moto.env.AWS_SECRET_ACCESS_KEY;
  const { AWS_ACCESS_KEY_ID: _id, AWS_SECRET_ACCESS_KEY: _secret, ...configEnv } = moto.env;
  app = await startTestApp({ clock: systemClock, configEnv });
  page = await startStatePage('127.0.0.24');
}, 600_000);

afterAll(async () => {
  await app?.close();
  await page?.close();
  await moto?.stop();
  process.env.AWS_ACCESS_KEY_ID = savedEnv.id;
  process.env.AWS_SECRET_ACCESS_KEY = savedEnv.secret;
  if (savedEnv.id === undefined) delete process.env.AWS_ACCESS_KEY_ID;
  if (savedEnv.secret === undefined) delete process.env.AWS_SECRET_ACCESS_KEY;
});

const keys = async () =>
  ((await moto.client.send(new ListObjectsV2Command({ Bucket: moto.bucket }))).Contents ?? []).map((o) => o.Key!);

const otherProjectKey = async () => {
  const project = await newProject(app.tenant.http);
  const key = await app.tenant.http.post('/org/api_keys', { name: 'other', project_id: project.id });
  expect(key.status, key.text).toBe(200);
  return app.client(key.body.key as string);
};

const session = async (client: HttpClient, body: Record<string, unknown>) => {
  const res = await client.post('/browsers', { headless: true, ...body });
  expect(res.status, res.text).toBe(200);
  return res.body as { session_id: string; cdp_ws_url: string };
};

describe('BROWSERPLANE_STORE=s3', () => {
  it('saves a profile from a real browser into the bucket and loads it in a second session', async () => {
    const { http: client, id: projectId } = await newProject(app.tenant.http);
    const profile = (await client.post('/profiles', { name: 's3-profile' })).body as { id: string };
    const writer = await session(client, { profile: { name: 's3-profile', save_changes: true } });
    await visit(writer.cdp_ws_url, page.url, 'S3');
    expect((await client.delete(`/browsers/${writer.session_id}`)).status).toBe(204);
    expect(await keys()).toContain(`browserplane/profiles/${app.tenant.orgId}/${projectId}/${profile.id}.tar`);

    const reader = await session(client, { profile: { name: 's3-profile' } });
    expect(await visit(reader.cdp_ws_url, page.url)).toEqual({ cookie: 'who=S3', stored: 'S3' });
    expect((await client.delete(`/browsers/${reader.session_id}`)).status).toBe(204);

    const other = await otherProjectKey();
    expect((await other.get(`/profiles/${profile.id}`)).status).toBe(404);
    const res = await fetch(`${other.baseUrl}/profiles/${profile.id}/download?format=tar`, { headers: { authorization: `Bearer ${other.key!}` } });
    expect(res.status).toBe(404);

    expect((await client.delete(`/profiles/${profile.id}`)).status).toBe(204);
    expect(await keys()).not.toContain(`browserplane/profiles/${app.tenant.orgId}/${projectId}/${profile.id}.tar`);
  }, 240_000);

  it('stores a replay in the bucket and serves it whole and by Range; another project gets 404', async () => {
    const { http: client, id: projectId } = await newProject(app.tenant.http);
    const browser = await session(client, { viewport: { width: 640, height: 480 } });
    const calls = new ReplayCalls(client, browser.session_id);
    const id = await calls.startOk({ max_duration_in_seconds: 60 });
    await sleep(1500);
    expect((await calls.stop(id)).status).toBe(204);
    expect(await keys()).toContain(`browserplane/replays/${app.tenant.orgId}/${projectId}/${id}.mp4`);

    const whole = await calls.download(id);
    expect(whole.status).toBe(200);
    const video = await Video.of(whole.bytes);
    try {
      expect((await video.facts()).codec).toBe('h264');
    } finally {
      await video.remove();
    }
    const url = `${client.baseUrl}/browsers/${browser.session_id}/replays/${id}`;
    const headers = { ...client.extraHeaders, authorization: `Bearer ${client.key!}`, accept: 'video/mp4' };
    const ranged = await fetch(url, { headers: { ...headers, range: 'bytes=4-11' } });
    expect(ranged.status).toBe(206);
    expect(ranged.headers.get('content-range')).toBe(`bytes 4-11/${whole.bytes.length}`);
    expect(Buffer.from(await ranged.arrayBuffer())).toEqual(whole.bytes.subarray(4, 12));
    const tail = await fetch(url, { headers: { ...headers, range: 'bytes=-100' } });
    expect(Buffer.from(await tail.arrayBuffer())).toEqual(whole.bytes.subarray(whole.bytes.length - 100));

    const other = await otherProjectKey();
    expect((await fetch(`${other.baseUrl}/browsers/${browser.session_id}/replays/${id}`, { headers: { authorization: `Bearer ${other.key!}` } })).status).toBe(404);
    expect((await client.delete(`/browsers/${browser.session_id}`)).status).toBe(204);
  }, 180_000);
});
