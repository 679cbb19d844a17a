import { stat } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../api/src/clock.js';
import type { HttpClient } from '../support/http.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { postForBytes } from './browser-computer.fixtures.js';
import { newProject } from './browsers.fixtures.js';
import { fsGet, readFile, type FsSession } from './browser-fs.fixtures.js';

/**
 * The display's MIT cookie lives outside the session's files (<work dir>/x11, not HOME,
 * which the fs API serves as "/"): a caller of the fs API cannot read it, while the
 * headful browser and computer control, which need it, still work. One real headful
 * session (its own Xvfb) against real Postgres.
 */

let app: TestApp;
let client: HttpClient;
let fs: FsSession;

beforeAll(async () => {
  app = await startTestApp({ clock: systemClock });
  ({ http: client } = await newProject(app.tenant.http));
  const res = await client.post('/browsers', { headless: false, viewport: { width: 800, height: 600 } });
  expect(res.status, res.text).toBe(200);
  const id = res.body.session_id as string;
  const { rows } = await app.database.db.query<{ agent_url: string }>('SELECT agent_url FROM browser_sessions WHERE id = $1', [id]);
  const root = (await (await fetch(`${rows[0]!.agent_url}/fs/root`, { headers: { authorization: `Bearer ${app.deps.agentTokens(id)}` } })).json()) as { host_root: string };
  fs = { id, client, hostRoot: root.host_root, cdpWsUrl: res.body.cdp_ws_url as string };
});
afterAll(async () => {
  await app?.close();
});

describe('the X authority of a headful session', () => {
  it('is not among the session files: not listed in "/", not readable as /Xauthority', async () => {
    const listed = await fsGet(fs, 'list_files', '/');
    expect(listed.status, listed.text).toBe(200);
    const names = (listed.body as Array<{ name: string }>).map((entry) => entry.name);
    expect(names).not.toContain('Xauthority');
    expect(names).not.toContain('x11');
    const read = await readFile(fs, '/Xauthority');
    expect(read.status).toBe(404);
    expect(read.body).toMatchObject({ code: 'not_found' });
  });

  it('cannot be reached from "/" by walking up', async () => {
    for (const attempt of ['/../x11/Xauthority', '/../../x11/Xauthority']) {
      const read = await readFile(fs, attempt);
      expect(read.status, attempt).toBe(400);
      expect(read.body).toMatchObject({ code: 'invalid_path' });
    }
  });

  it('is in <work dir>/x11, the display user’s alone', async () => {
    const dir = path.join(path.dirname(fs.hostRoot), 'x11');
    const home = await stat(fs.hostRoot);
    const dirInfo = await stat(dir);
    const cookie = await stat(path.join(dir, 'Xauthority'));
    expect(dirInfo.mode & 0o777).toBe(0o700);
    expect(cookie.mode & 0o777).toBe(0o600);
    // The same owner as HOME: the browser's user (the session's own uid when the service runs as root).
    expect([dirInfo.uid, cookie.uid]).toEqual([home.uid, home.uid]);
  });

  it('still lets computer control drive the display', async () => {
    expect((await client.post(`/browsers/${fs.id}/computer/move_mouse`, { x: 200, y: 150 })).status).toBe(204);
    const position = await client.post(`/browsers/${fs.id}/computer/get_mouse_position`, {});
    expect(position.status, position.text).toBe(200);
    expect(position.body).toEqual({ x: 200, y: 150 });
    const shot = await postForBytes(client, `/browsers/${fs.id}/computer/screenshot`, {});
    expect(shot.status).toBe(200);
    expect(shot.type).toBe('image/png');
  });
});
