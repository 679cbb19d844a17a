import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { rm, writeFile as writeHostFile } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../api/src/clock.js';
import { processGroupMembers } from '../../lib/process-group.js';
import { startTestApp, type TestApp } from '../support/test-app.js';
import { newProject } from './browsers.fixtures.js';
import { newFsSession, readFile, writeFile, type FsSession } from './browser-fs.fixtures.js';

/**
 * Issue 16 item 2, as an attacker in session B (project B) would try it against session
 * A (project A) in embedded mode: B's own page, driven over B's cdp_ws_url, opens file://
 * URLs into A's work dir and /proc. Nothing of A may show. Real service, real agents,
 * real Chromium.
 */

let app: TestApp;
let a: FsSession;
let b: FsSession;
let browserB: Browser;
let workA: string;
let chromiumA: number;

const SECRET = 'secret of session A';

const agentOf = async (sessionId: string) => {
  const { rows } = await app.database.db.query<{ agent_url: string }>('SELECT agent_url FROM browser_sessions WHERE id = $1', [sessionId]);
  return rows[0]!.agent_url;
};
const healthOf = async (sessionId: string) =>
  (await (await fetch(`${await agentOf(sessionId)}/health?wait_ms=5000`, { headers: { authorization: `Bearer ${app.deps.agentTokens(sessionId)}` } })).json()) as { browser: { pid: number } };
const uidOf = (pid: number) => Number(/^Uid:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]);

/** What a fresh page of B shows at `url`, or undefined when the navigation fails. */
async function visit(url: string): Promise<string | undefined> {
  const page = await browserB.contexts()[0]!.newPage();
  try {
    const response = await page.goto(url, { timeout: 10_000 });
    if (response && !response.ok()) return undefined;
    return await page.evaluate<string>("document.body ? document.body.innerText : ''");
  } catch {
    return undefined;
  } finally {
    await page.close();
  }
}

beforeAll(async () => {
  app = await startTestApp({ clock: systemClock });
  const projectA = await newProject(app.tenant.http);
  const projectB = await newProject(app.tenant.http);
  a = await newFsSession(app, projectA.http);
  b = await newFsSession(app, projectB.http);
  expect((await writeFile(a, '/secret-a.txt', SECRET)).status).toBe(204);
  workA = path.dirname(a.hostRoot);
  chromiumA = (await healthOf(a.id)).browser.pid;
  browserB = await chromium.connectOverCDP(b.cdpWsUrl);
}, 120_000);

afterAll(async () => {
  await browserB?.close().catch(() => undefined);
  await app?.close();
});

describe("a session's page cannot reach another session's files or processes", () => {
  it('runs each session as its own unprivileged uid, which owns its work dir (0700) and the files the fs API writes', () => {
    const workB = path.dirname(b.hostRoot);
    const [uidA, uidB] = [statSync(workA).uid, statSync(workB).uid];
    console.log(`  uid A ${uidA}, uid B ${uidB}; work dirs ${workA} ${workB}`);
    expect(uidA).not.toBe(0);
    expect(uidB).not.toBe(0);
    expect(uidA).not.toBe(uidB);
    expect(statSync(workA).mode & 0o777).toBe(0o700);
    expect(statSync(path.dirname(workA)).mode & 0o777).toBe(0o711);
    expect(statSync(path.join(a.hostRoot, 'secret-a.txt')).uid).toBe(uidA);
    expect(uidOf(chromiumA)).toBe(uidA);
  });

  it("B's page reads nothing in A's work dir: home files, user-data/Default, the work dir itself", async () => {
    // The control: B's page does read file:// URLs in its own dir.
    expect((await writeFile(b, '/mine.txt', 'mine')).status).toBe(204);
    expect(await visit(`file://${b.hostRoot}/mine.txt`)).toContain('mine');
    for (const url of [`file://${workA}/home/secret-a.txt`, `file://${workA}/user-data/Default/`, `file://${workA}/user-data/`, `file://${workA}/`]) {
      const shown = await visit(url);
      console.log(`  ${url}: ${shown === undefined ? 'refused' : JSON.stringify(shown.slice(0, 120))}`);
      if (shown === undefined) continue;
      expect(shown).not.toContain(SECRET);
      expect(shown).not.toContain('Cookies');
      expect(shown).not.toContain('Preferences');
      expect(shown).not.toContain('secret-a.txt');
    }
    // Not even A's dir name shows in the directory of all browsers.
    const listing = await visit(`file://${path.dirname(workA)}/`);
    expect(listing ?? '').not.toContain(path.basename(workA));
  });

  it("B's /proc lists none of A's processes, and A's /proc entries are not there", async () => {
    const membersA = await processGroupMembers(chromiumA);
    expect(membersA.length).toBeGreaterThan(1);
    const listing = await visit('file:///proc/');
    const pids = [...(listing ?? '').matchAll(/^(\d+)\/?\s/gm)].map((match) => Number(match[1]));
    console.log(`  B's /proc lists ${pids.length} pids: ${pids.join(' ')}; A's Chromium is ${chromiumA}`);
    expect(listing).toBeDefined();
    for (const pid of membersA) expect(pids).not.toContain(pid);
    for (const url of [`file:///proc/${chromiumA}/fd/`, `file:///proc/${chromiumA}/cmdline`, `file:///proc/${chromiumA}/environ`, `file:///proc/${chromiumA}/root/${workA}/home/secret-a.txt`]) {
      const shown = await visit(url);
      console.log(`  ${url}: ${shown === undefined ? 'refused' : JSON.stringify(shown.slice(0, 120))}`);
      expect(shown ?? '').not.toContain(workA);
      expect(shown ?? '').not.toContain(SECRET);
      expect(shown ?? '').not.toMatch(/user-data|socket:|pipe:/);
    }
  });

  it("another session's uid cannot use a headful browser's display; the browser's own uid can", async () => {
    const projectA = await newProject(app.tenant.http);
    const created = await projectA.http.post('/browsers', { headless: false });
    expect(created.status).toBe(200);
    const headfulId = created.body.session_id as string;
    const { browser } = await healthOf(headfulId);
    const environ = readFileSync(`/proc/${browser.pid}/environ`, 'utf8').split('\0');
    const display = environ.find((entry) => entry.startsWith('DISPLAY='))!.slice('DISPLAY='.length);
    const xauthority = environ.find((entry) => entry.startsWith('XAUTHORITY='))!.slice('XAUTHORITY='.length);
    const uidB = statSync(path.dirname(b.hostRoot)).uid;
    const uidH = uidOf(browser.pid);
    const xdpyinfoAs = (uid: number) =>
      spawnSync('setpriv', [`--reuid=${uid}`, `--regid=${uid}`, '--clear-groups', '--', 'xdpyinfo', '-display', display], {
        env: { PATH: process.env.PATH, XAUTHORITY: xauthority },
        encoding: 'utf8',
        timeout: 10_000,
      });
    const own = xdpyinfoAs(uidH);
    const other = xdpyinfoAs(uidB);
    console.log(`  display ${display}, ${xauthority}: as its uid ${uidH} exit ${own.status}; as B's uid ${uidB} exit ${other.status}: ${other.stderr.trim().split('\n')[0]}`);
    expect(own.status).toBe(0);
    expect(other.status).not.toBe(0);
    expect(other.stdout).not.toContain('screen #0');
    expect((await projectA.http.delete(`/browsers/${headfulId}`)).status).toBe(204);
  }, 60_000);

  it("B's page does not see the host's /tmp, and a download B points at /tmp lands in B's own files, not on the host", async () => {
    // A file a host program (another service, a log with a key in it) left in the shared /tmp.
    const marker = `bp-host-marker-${randomBytes(6).toString('hex')}`;
    await writeHostFile(`/tmp/${marker}.txt`, 'host secret');
    const escape = `bp-download-escape-${randomBytes(6).toString('hex')}`;
    const server = createServer((_request, response) => {
      response.writeHead(200, { 'content-type': 'application/octet-stream', 'content-disposition': 'attachment; filename="loot.txt"' });
      response.end('downloaded by B');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const cdp = await browserB.newBrowserCDPSession();
    try {
      const listing = await visit('file:///tmp/');
      console.log(`  B's file:///tmp/: ${JSON.stringify((listing ?? 'refused').slice(0, 200))}`);
      expect(listing ?? '').not.toContain(marker);
      expect(await visit(`file:///tmp/${marker}.txt`)).toBeUndefined();

      // The path a client gives is a path of the browser's files ("/" of the fs API).
      await cdp.send('Browser.setDownloadBehavior', { behavior: 'allow', downloadPath: `/tmp/${escape}`, eventsEnabled: true });
      const completed = new Promise<void>((resolve) => cdp.on('Browser.downloadProgress', (event) => event.state === 'completed' && resolve()));
      const { port } = server.address() as AddressInfo;
      const page = await browserB.contexts()[0]!.newPage();
      await page.goto(`http://127.0.0.1:${port}/loot`).catch(() => undefined);
      await completed;
      await page.close();
      expect(existsSync(`/tmp/${escape}`), 'the host /tmp got the download').toBe(false);
      const read = await readFile(b, `/tmp/${escape}/loot.txt`);
      expect(read.status).toBe(200);
      expect(read.text).toBe('downloaded by B');
    } finally {
      await cdp.detach().catch(() => undefined);
      server.close();
      await rm(`/tmp/${marker}.txt`, { force: true });
      await rm(`/tmp/${escape}`, { recursive: true, force: true });
    }
  });
});

