import { mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type Kernel from '@onkernel/sdk';
import { toFile } from '@onkernel/sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { unique } from './support/sdk.js';
import { runPython, type PythonTarget } from './support/python.js';
import { cleanupServices, startService, type RunningService } from '../support/service.js';
import { startTestPageServer, type TestPageServer } from '../support/test-page-server.js';

/**
 * A Python app, deployed and invoked as a TS one is (invocations-run.sdk.test.ts), with the
 * real `kernel` from PyPI installed by the build (pip in the sandbox, a venv in the build
 * dir). Kernel's template is kernel + playwright; here it is kernel + websockets, a small
 * CDP client: playwright's wheel is ~40 MB with a Node driver inside, which every run of
 * the tier would download again, and the point is the Python runtime, not playwright.
 * The action creates a browser with the run's key, drives it to a local page over CDP and
 * returns the title. The deploy and the invoke are made once with the TS SDK and once
 * with the Python SDK itself.
 */

let service: RunningService;
let client: Kernel;
let pages: TestPageServer;
let appName: string;
let target: PythonTarget;
let projectName: string;

const APP = (name: string) => `
import asyncio, itertools, json
import kernel
from kernel import Kernel
from websockets.sync.client import connect

client = Kernel()
app = kernel.App(${JSON.stringify(name)})


def cdp(ws, counter, method, params=None, session=None):
    ident = next(counter)
    message = {"id": ident, "method": method, "params": params or {}}
    if session:
        message["sessionId"] = session
    ws.send(json.dumps(message))
    while True:
        reply = json.loads(ws.recv())
        if reply.get("id") == ident:
            if "error" in reply:
                raise RuntimeError(method + ": " + reply["error"].get("message", ""))
            return reply["result"]


@app.action("title")
async def title(ctx, payload):
    # No invocation_id: the run's key makes the browser the invocation's.
    browser = client.browsers.create(headless=True)
    try:
        with connect(browser.cdp_ws_url, max_size=None, open_timeout=30) as ws:
            counter = itertools.count(1)
            target = cdp(ws, counter, "Target.createTarget", {"url": payload["url"]})["targetId"]
            session = cdp(ws, counter, "Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
            for _ in range(100):
                state = cdp(ws, counter, "Runtime.evaluate", {"expression": "[document.readyState, location.href, document.title]", "returnByValue": True}, session)
                ready, href, text = state["result"]["value"]
                if ready == "complete" and href == payload["url"]:
                    break
                await asyncio.sleep(0.1)
        print("visited " + payload["url"])
        return {"title": text, "session_id": browser.session_id, "invocation": ctx.invocation_id}
    finally:
        client.browsers.delete_by_id(browser.session_id)


@app.action("boom")
def boom(ctx):
    raise RuntimeError("python boom on purpose")
`;

const PYPROJECT = (deps: string[]) =>
  `[project]\nname = "py-e2e"\nversion = "0.1.0"\nrequires-python = ">=3.11"\ndependencies = ${JSON.stringify(deps)}\n`;

async function zipOf(files: Record<string, string>): Promise<Buffer> {
  const { default: yazl } = await import('yazl');
  const zip = new yazl.ZipFile();
  for (const [name, text] of Object.entries(files)) zip.addBuffer(Buffer.from(text), name);
  zip.end();
  const chunks: Buffer[] = [];
  for await (const chunk of zip.outputStream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

async function deploy(files: Record<string, string>, version: string) {
  const created = await client.deployments.create({ file: await toFile(await zipOf(files), 'app.zip'), entrypoint_rel_path: 'main.py', version });
  for await (const frame of await client.deployments.follow(created.id)) void frame;
  return client.deployments.retrieve(created.id);
}

const DEPS = ['kernel==0.131.0', 'websockets==15.0.1'];

beforeAll(async () => {
  service = await startService();
  const admin = service.client();
  projectName = unique('py-runs');
  const project = await admin.projects.create({ name: projectName });
  client = service.client(undefined, { projectID: project.id, timeout: 300_000 });
  target = { url: service.url, apiKey: service.adminKey };
  pages = await startTestPageServer({ '/hello': '<!doctype html><title>Hello from Python</title><p>hi</p>' });
  appName = unique('py-app');
  const done = await deploy({ 'main.py': APP(appName), 'pyproject.toml': PYPROJECT(DEPS) }, '1');
  if (done.status !== 'running') throw new Error(`the deployment did not build: ${done.status} ${done.status_reason ?? ''}`);
}, 600_000);
afterAll(async () => {
  await pages?.close();
  await cleanupServices();
});

describe('a Python app', () => {
  it('is listed with its actions', async () => {
    const listed = await client.apps.list({ app_name: appName });
    expect(listed.items.map((app) => ({ name: app.app_name, actions: app.actions.map((a) => a.name) }))).toEqual([{ name: appName, actions: ['title', 'boom'] }]);
  });

  it('runs an action that drives its own browser to a local page, then deletes the browser', async () => {
    const created = await client.invocations.create({ app_name: appName, action_name: 'title', version: '1', payload: JSON.stringify({ url: `${pages.url}/hello` }) });
    expect(created.status, created.status_reason).toBe('succeeded');
    const output = JSON.parse(created.output!) as { title: string; session_id: string; invocation: string };
    expect(output).toMatchObject({ title: 'Hello from Python', invocation: created.id });
    expect(pages.requests).toContain('/hello');
    const live = [];
    for await (const browser of client.browsers.list()) live.push(browser.session_id);
    expect(live).not.toContain(output.session_id);
    const frames = [];
    for await (const frame of await client.invocations.follow(created.id)) frames.push(frame);
    expect(frames.some((frame) => frame.event === 'log' && frame.message === `visited ${pages.url}/hello`)).toBe(true);
  }, 120_000);

  it('fails an invocation whose action raises, with its message', async () => {
    const created = await client.invocations.create({ app_name: appName, action_name: 'boom', version: '1' });
    expect(created).toMatchObject({ status: 'failed', status_reason: 'python boom on purpose' });
  }, 60_000);

  it('fails the build of a dependency that does not exist, and says so', async () => {
    const done = await deploy({ 'main.py': APP(unique('py-bad')), 'pyproject.toml': PYPROJECT(['kernel==0.131.0', 'browserplane-no-such-package-xyz==1.0']) }, '1');
    expect(done.status).toBe('failed');
    expect(done.status_reason).toMatch(/^pip install failed \(exit 1\): a dependency could not be installed/);
    expect(done.status_reason).toMatch(/browserplane-no-such-package-xyz/);
  }, 300_000);

  it('is deployed and invoked with the Python SDK', async () => {
    const name = unique('py-sdk-app');
    const dir = mkdtempSync(path.join(os.tmpdir(), 'bp-py-zip-'));
    const zip = path.join(dir, 'app.zip');
    writeFileSync(zip, await zipOf({ 'main.py': APP(name), 'pyproject.toml': PYPROJECT(DEPS) }));
    const got = await runPython<{ status: string; reason: string | null; output: { title: string } | null; failed: string }>(
      target,
      `
      import time
      k = client(project=${JSON.stringify(projectName)}, timeout=300)
      with open(${JSON.stringify(zip)}, "rb") as f:
          d = k.deployments.create(entrypoint_rel_path="main.py", file=f, version="py")
      while True:
          d = k.deployments.retrieve(d.id)
          if d.status not in ("queued", "in_progress"):
              break
          time.sleep(1)
      out = None
      failed = None
      if d.status == "running":
          inv = k.invocations.create(app_name=${JSON.stringify(name)}, action_name="title", version="py", payload=json.dumps({"url": ${JSON.stringify(`${pages.url}/hello`)}}))
          out = json.loads(inv.output) if inv.output else None
          failed = k.invocations.create(app_name=${JSON.stringify(name)}, action_name="boom", version="py").status_reason
      emit({"status": d.status, "reason": d.status_reason, "output": out, "failed": failed})
      `,
      540_000,
    );
    expect(got.status, got.reason ?? '').toBe('running');
    expect(got.output?.title).toBe('Hello from Python');
    expect(got.failed).toBe('python boom on purpose');
  }, 600_000);
});
