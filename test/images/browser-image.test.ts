// The browser image (docker/browser.Dockerfile) as a pod runs it. Real: the image `make
// images` built, run by podman with runc under the browser pod's securityContext
// (operator/src/k8s/browser-pod.ts: uid/gid 10001, fsGroup 10001, read-only root
// filesystem with emptyDirs on /work, /tmp and the policy dir and a 1 GiB memory /dev/shm,
// every capability dropped, no privilege escalation, the chart's 2 GiB memory limit) and
// the env the operator gives the agent (AGENT_SPEC, AGENT_TOKEN, AGENT_PORT,
// AGENT_WORK_DIR); Debian's Chromium inside it; playwright-core on the host over the
// agent's /cdp; a page server on the host's loopback. The one difference from a pod:
// the agent listens on 127.0.0.1 (a free port of the host's network), not 0.0.0.0, so
// nothing leaves loopback.
import { randomBytes } from 'node:crypto';
import { readlink } from 'node:fs/promises';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { eventually } from '../support/eventually.js';
import { startTestPageServer, type TestPageServer } from '../support/test-page-server.js';
import { commandLine, freePort, POD_UID, processStatus, processTree, startPod, type Pod } from './support/containers.js';

let pages: TestPageServer;

beforeAll(async () => {
  pages = await startTestPageServer({
    '/title': '<!doctype html><title>served to the container</title><body>hello</body>',
    '/input': `<!doctype html><title>input</title><body style="margin:0">
      <input id="text" autofocus style="position:absolute;left:0;top:0;width:400px;height:60px">
      <script>window.clicks = []; addEventListener('click', (e) => clicks.push([e.clientX, e.clientY]));</script></body>`,
  });
});
afterAll(async () => {
  await pages?.close();
});

interface BrowserPod {
  pod: Pod;
  url: string;
  auth: { authorization: string };
  health(): Promise<{ status: string; browser: { sandbox: boolean; pid: number; version: string } | null }>;
}

async function startBrowserPod(options: { seccomp: 'runtime-default' | 'unconfined'; headless: boolean; chromePolicy?: Record<string, unknown> }): Promise<BrowserPod> {
  const port = await freePort();
  const token = randomBytes(32).toString('base64url');
  const browserId = `img${randomBytes(6).toString('hex')}`;
  const spec = {
    browserId,
    orgId: 'org_images',
    projectId: 'proj_images',
    headless: options.headless,
    stealth: false,
    kioskMode: false,
    viewport: { width: 1024, height: 768 },
    chromePolicy: options.chromePolicy ?? {},
    labels: {},
  };
  const pod = await startPod({
    image: inject('images').browser,
    name: 'bp-browser',
    env: { AGENT_SPEC: JSON.stringify(spec), AGENT_TOKEN: token, AGENT_HOST: '127.0.0.1', AGENT_PORT: String(port), AGENT_WORK_DIR: '/work/browser' },
    emptyDirs: ['/work', '/tmp', '/etc/chromium/policies/managed'],
    shmSize: '1g',
    memory: '2g',
    seccomp: options.seccomp,
  });
  const url = `http://127.0.0.1:${port}`;
  const auth = { authorization: `Bearer ${token}` };
  const browserPod: BrowserPod = {
    pod,
    url,
    auth,
    health: async () => (await (await fetch(`${url}/health`, { headers: auth })).json()) as Awaited<ReturnType<BrowserPod['health']>>,
  };
  try {
    await eventually(async () => (await browserPod.health()).status === 'ready', { timeoutMs: 60_000, intervalMs: 250, what: 'the agent is ready', retryErrors: true, detail: async () => (await pod.running()) + '\n' + (await pod.logs()).slice(-4000) });
  } catch (error) {
    // No test holds the pod yet: remove it here, or a failed start leaves it behind.
    await pod.remove();
    throw error;
  }
  return browserPod;
}

/** Chromium's processes in the pod: host pid, command line, status. */
async function chromiumProcesses(pod: Pod) {
  const all = await processTree(await pod.pid());
  const found = [];
  for (const pid of all) {
    const argv = await commandLine(pid);
    if (argv[0]?.includes('chromium')) found.push({ pid, argv, status: await processStatus(pid), userNs: await readlink(`/proc/${pid}/ns/user`).catch(() => '') });
  }
  return found;
}

const agentPid = async (pod: Pod) => {
  for (const pid of await processTree(await pod.pid())) if ((await commandLine(pid)).some((arg) => arg.endsWith('dist/agent/src/main.js'))) return pid;
  throw new Error('no agent process in the pod');
};

describe('the browser image under the runtime default seccomp profile (podman), headful', () => {
  let browser: BrowserPod;
  let cdp: Browser | undefined;
  beforeAll(async () => {
    browser = await startBrowserPod({ seccomp: 'runtime-default', headless: false, chromePolicy: { DefaultCookiesSetting: 1 } });
  });
  afterAll(async () => {
    await cdp?.close().catch(() => undefined);
    await browser?.pod.remove();
  });

  it('runs the agent and Chromium as uid 10001 with no capabilities, no new privileges and seccomp on', async () => {
    const agent = await processStatus(await agentPid(browser.pod));
    expect(agent.Uid).toBe(`${POD_UID}\t${POD_UID}\t${POD_UID}\t${POD_UID}`);
    expect(agent.Gid).toBe(`${POD_UID}\t${POD_UID}\t${POD_UID}\t${POD_UID}`);
    expect(agent.CapEff).toBe('0000000000000000');
    expect(agent.CapBnd).toBe('0000000000000000');
    expect(agent.NoNewPrivs).toBe('1');
    expect(agent.Seccomp).toBe('2');
    const processes = await chromiumProcesses(browser.pod);
    expect(processes.length).toBeGreaterThan(2);
    for (const { status } of processes) expect(status.Uid?.split('\t')[0]).toBe(String(POD_UID));
  });

  it('keeps the root filesystem read-only; only the emptyDirs take writes', async () => {
    for (const target of ['/app/x', '/etc/x', '/home/browserplane/x', '/usr/lib/chromium/x']) {
      const result = await browser.pod.exec(['touch', target]);
      expect(result.code, target).not.toBe(0);
      expect(result.stderr, target).toMatch(/Read-only file system/);
    }
    expect((await browser.pod.exec(['id', '-u'])).stdout.trim()).toBe(String(POD_UID));
    expect((await browser.pod.exec(['touch', '/tmp/x', '/work/x'])).code).toBe(0);
  });

  it('serves CDP on /cdp with the token: a page from the host loopback loads and its title reads back', async () => {
    const refused = await fetch(`${browser.url}/json/version`);
    expect(refused.status).toBe(401);
    cdp = await chromium.connectOverCDP(`${browser.url.replace('http', 'ws')}/cdp`, { headers: browser.auth });
    const context = cdp.contexts()[0]!;
    const page = context.pages()[0] ?? (await context.newPage());
    await page.goto(`${pages.url}/title`);
    expect(await page.title()).toBe('served to the container');
    expect(await page.evaluate<string>('navigator.userAgent')).toMatch(/Chrome\//);
  });

  it('reports the sandbox as it runs, and the Chromium processes agree (a page is loaded, so renderers exist)', async () => {
    const health = await browser.health();
    const processes = await chromiumProcesses(browser.pod);
    const renderers = processes.filter(({ argv }) => argv.includes('--type=renderer'));
    const main = processes.find(({ argv }) => argv[0]!.endsWith('/chromium') && !argv.some((arg) => arg.startsWith('--type=')))!;
    expect(renderers.length).toBeGreaterThan(0);
    if (health.browser!.sandbox) {
      // The namespace sandbox: renderers in a user namespace of their own under seccomp-bpf.
      expect(main.argv).not.toContain('--no-sandbox');
      for (const renderer of renderers) {
        expect(renderer.userNs).not.toBe(main.userNs);
        expect(renderer.status.Seccomp).toBe('2');
      }
    } else {
      expect(main.argv).toContain('--no-sandbox');
      const logs = await browser.pod.logs();
      expect(logs).toMatch(/SANDBOX OFF/);
      expect(logs).toMatch(/sys_chroot/);
    }
    expect(health.browser!.sandbox).toBe(EXPECTED_SANDBOX['runtime-default']);
  });

  it('writes and reads a file through the fs API', async () => {
    const content = `written in the pod ${randomBytes(8).toString('hex')}`;
    const written = await fetch(`${browser.url}/fs/write_file?path=/notes/hello.txt`, {
      method: 'PUT',
      headers: { ...browser.auth, 'content-type': 'application/octet-stream' },
      body: content,
    });
    expect(written.status, await written.clone().text()).toBeLessThan(300);
    const read = await fetch(`${browser.url}/fs/read_file?path=/notes/hello.txt`, { headers: browser.auth });
    expect(read.status).toBe(200);
    expect(await read.text()).toBe(content);
  });

  it('drives the page with the computer API (xdotool on the pod\'s Xvfb): a click and typed text', async () => {
    cdp ??= await chromium.connectOverCDP(`${browser.url.replace('http', 'ws')}/cdp`, { headers: browser.auth });
    const page = cdp.contexts()[0]!.pages()[0]!;
    await page.goto(`${pages.url}/input`);
    await page.bringToFront();
    const post = async (operation: string, body: unknown) => {
      const response = await fetch(`${browser.url}/computer/${operation}`, { method: 'POST', headers: { ...browser.auth, 'content-type': 'application/json' }, body: JSON.stringify(body) });
      expect(response.status, `${operation}: ${await response.clone().text()}`).toBeLessThan(300);
    };
    // Window at 0,0 (--window-position); the input is at the top left of the page.
    const box = await page.evaluate<{ x: number; y: number }>('({ x: screenX + (outerWidth - innerWidth), y: screenY + (outerHeight - innerHeight) })');
    await post('click_mouse', { x: box.x + 100, y: box.y + 30 });
    await eventually(async () => (await page.evaluate<number>('clicks.length')) > 0, { timeoutMs: 10_000, intervalMs: 250, what: 'the page saw the click', retryErrors: true });
    await post('type', { text: 'typed in the pod' });
    await eventually(async () => (await page.inputValue('#text')) === 'typed in the pod', { timeoutMs: 10_000, intervalMs: 250, what: 'the input holds the typed text', retryErrors: true });
  });

  it('applies chrome_policy from the policy emptyDir', async () => {
    const listed = await browser.pod.exec(['ls', '/etc/chromium/policies/managed']);
    expect(listed.code).toBe(0);
    expect(listed.stdout.trim()).not.toBe('');
  });
});

/**
 * Whether Chromium's sandbox runs, per seccomp profile. Debian ships no setuid sandbox
 * helper, so the sandbox is the namespace one: Chromium (uid 10001, no capabilities)
 * creates an unprivileged user namespace for its zygote and chroots it. Measured here
 * (podman 4.3, runc, kernel 6.18, no-new-privileges, all capabilities dropped):
 * - podman's default profile lets unshare(CLONE_NEWUSER) through but allows chroot only
 *   with CAP_SYS_CHROOT, which the pod dropped: the zygote fails
 *   `Check failed: sys_chroot("/proc/self/fdinfo/") == 0` and Chromium dies with SIGTRAP.
 *   The agent logs SANDBOX OFF and relaunches with --no-sandbox; the pod then relies on
 *   its own confinement (uid 10001, no capabilities, no new privileges, the container's
 *   seccomp filter, read-only root filesystem) and, where set, browsers.runtimeClassName.
 * - unconfined: the sandbox runs (renderers in their own user namespace under seccomp-bpf).
 */
const EXPECTED_SANDBOX: Record<'runtime-default' | 'unconfined', boolean> = {
  'runtime-default': false,
  unconfined: true,
};

describe('the browser image with seccomp unconfined, headless', () => {
  let browser: BrowserPod;
  afterAll(async () => {
    await browser?.pod.remove();
  });

  it('starts Chromium and serves a page over CDP; the sandbox as measured', async () => {
    browser = await startBrowserPod({ seccomp: 'unconfined', headless: true });
    const agent = await processStatus(await agentPid(browser.pod));
    expect(agent.Seccomp).toBe('0');
    expect((await browser.health()).browser!.sandbox).toBe(EXPECTED_SANDBOX.unconfined);
    const cdp = await chromium.connectOverCDP(`${browser.url.replace('http', 'ws')}/cdp`, { headers: browser.auth });
    try {
      const context = cdp.contexts()[0]!;
      const page = context.pages()[0] ?? (await context.newPage());
      await page.goto(`${pages.url}/title`);
      expect(await page.title()).toBe('served to the container');
    } finally {
      await cdp.close();
    }
  });
});
