import { rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { fakeChromiumDir } from '../support/agent-access.js';
import { cleanupServices, startService, type RunningService } from '../support/service.js';

/**
 * A cold create answers at Chromium's spawn (issue 20: the caller's first CDP command then
 * waits at the agent for Chromium's first answer instead of following it). Against the
 * built service with real browsers; Chromium is made slow or broken only by a wrapper
 * script in front of the real binary (BROWSERPLANE_CHROMIUM_PATH), two seconds of sleep, so the order of
 * events is certain without timing anything.
 */

const CHROMIUM = process.env.CHROME_PATH ?? '/usr/lib/chromium/chromium';
let scripts: string;

beforeAll(async () => {
  // Not under /tmp nor the work root: the browser's mount namespace hides both (agent/src/isolation.ts).
  scripts = await fakeChromiumDir();
  await writeFile(path.join(scripts, 'late-chromium.sh'), `#!/bin/bash\nsleep 2\nexec ${CHROMIUM} "$@"\n`, { mode: 0o755 });
  await writeFile(path.join(scripts, 'failing-chromium.sh'), '#!/bin/bash\nsleep 2\necho "late failure on purpose" >&2\nexit 3\n', { mode: 0o755 });
});
afterAll(async () => {
  await cleanupServices();
  await rm(scripts, { recursive: true, force: true });
});

function post(service: RunningService, body: Record<string, unknown>) {
  return fetch(`${service.url}/browsers`, {
    method: 'POST',
    headers: { authorization: `Bearer ${service.adminKey}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
}

/** One CDP command over a fresh connection to cdp_ws_url: its answer, or how the connection failed. */
function firstAnswer(url: string): Promise<{ result?: Record<string, unknown> } | { failed: string }> {
  return new Promise((resolve) => {
    const ws = new WebSocket(url, { perMessageDeflate: false });
    ws.once('open', () => ws.send(JSON.stringify({ id: 1, method: 'Browser.getVersion' })));
    ws.once('message', (data: Buffer) => {
      resolve(JSON.parse(data.toString('utf8')) as { result?: Record<string, unknown> });
      ws.close();
    });
    ws.once('unexpected-response', (_request, response) => {
      response.resume();
      resolve({ failed: `upgrade answered ${response.statusCode}` });
    });
    ws.once('close', (code) => resolve({ failed: `closed ${code}` }));
    ws.once('error', (error) => resolve({ failed: error.message }));
  });
}

const launchLogged = (service: RunningService, id: string) => service.logs().some((line) => line.msg === 'browser launch timings' && line.browser_id === id);

describe('a cold create', () => {
  it('answers while Chromium starts; the first CDP command and API calls made then are served once it answers', async () => {
    const service = await startService({ env: { BROWSERPLANE_CHROMIUM_PATH: path.join(scripts, 'late-chromium.sh') } });
    const res = await post(service, { headless: true });
    expect(res.status).toBe(200);
    const session = (await res.json()) as { session_id: string; cdp_ws_url: string };
    // Answered before the launch finished: the runtime logs its timings once Chromium is ready.
    expect(launchLogged(service, session.session_id)).toBe(false);
    const [answer, screenshot] = await Promise.all([
      firstAnswer(session.cdp_ws_url),
      fetch(`${service.url}/browsers/${session.session_id}/computer/screenshot`, { method: 'POST', headers: { authorization: `Bearer ${service.adminKey}` } }),
    ]);
    expect(answer).toMatchObject({ result: { product: expect.stringMatching(/^Chrome\//) } });
    expect(screenshot.status).toBe(200);
    expect(screenshot.headers.get('content-type')).toBe('image/png');
    expect(launchLogged(service, session.session_id)).toBe(true);
  }, 60_000);

  it('ends the session as a failed launch when Chromium fails after the answer (what fails before the spawn stays the create’s error: browsers-profile.test.ts)', async () => {
    const service = await startService({ env: { BROWSERPLANE_CHROMIUM_PATH: path.join(scripts, 'failing-chromium.sh') } });
    const res = await post(service, { headless: true });
    expect(res.status).toBe(200);
    const session = (await res.json()) as { session_id: string; cdp_ws_url: string };
    // The client that connected meanwhile is not served a browser that never came up.
    expect(await firstAnswer(session.cdp_ws_url)).toMatchObject({ failed: expect.any(String) });
    const auth = { authorization: `Bearer ${service.adminKey}` };
    await vi.waitFor(async () => expect((await fetch(`${service.url}/browsers/${session.session_id}`, { headers: auth })).status).toBe(404), { timeout: 20_000, interval: 200 });
    const ended = (await (await fetch(`${service.url}/browsers/${session.session_id}?include_deleted=true`, { headers: auth })).json()) as { deleted_at?: string };
    expect(ended.deleted_at).toEqual(expect.any(String));
    expect(service.logs().some((line) => line.msg === 'browser launch failed' && line.sessionId === session.session_id)).toBe(true);

  }, 60_000);
});
